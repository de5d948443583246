// Command research asks a research question and follows the critic loop live: each plan, each
// research result with its citations, each critic decision and the expert's answer, then the
// final answer and the reasoning trace.
//
//	go run ./examples/research [-addr HOST:PORT] [-question "..."]
//
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
// the API key.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
)

func main() {
	def := os.Getenv("FRONTDESK_ADDR")
	if def == "" {
		def = "127.0.0.1:50051"
	}
	addr := flag.String("addr", def, "frontdesk-server address")
	question := flag.String("question", "Who invented CRISPR gene editing, and when was the transistor invented?", "the research question")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := frontdesk.Connect(*addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fmt.Printf("question: %s\n", *question)
	run, err := c.Ask(ctx, *question)
	if err != nil {
		fail(err)
	}
	for p := range run.Progress() {
		switch {
		case p.GetEvent() != nil:
			ev := p.GetEvent()
			if kind := frontdesk.EventKind(ev); kind == "node_started" || kind == "run_finished" {
				fmt.Println(strings.TrimRight(fmt.Sprintf("  event %3d %-17s %s", ev.GetEventId(), kind, ev.GetNode()), " "))
			}
		case p.GetPlan() != nil:
			plan := p.GetPlan()
			fmt.Printf("plan (attempt %d):\n", plan.GetAttempt())
			for i, step := range plan.GetResearchSteps() {
				fmt.Printf("  research %d: %s\n", i, step)
			}
			for i, step := range plan.GetExpertSteps() {
				fmt.Printf("  expert %d: %s\n", i, step)
			}
		case p.GetResearchResult() != nil:
			r := p.GetResearchResult()
			fmt.Printf("result [step %d] %s (attempt %d): %s\n", r.GetStepId(), r.GetStep(), r.GetAttempt(), r.GetAnswer())
			for _, cit := range r.GetCitations() {
				fmt.Printf("  [%s#%d] %s\n", cit.GetDocumentId(), cit.GetPassage(), cit.GetDocumentTitle())
			}
		case p.GetCriticDecision() != nil:
			v := p.GetCriticDecision()
			fmt.Printf("%s: %s (retry %d) %s\n", v.GetCritic(), trim(v.GetDecision().String(), "CRITIC_DECISION_"), v.GetRetryCount(), v.GetFeedback())
		case p.GetExpertAnswer() != nil:
			e := p.GetExpertAnswer()
			fmt.Printf("expert (attempt %d): %s\n", e.GetAttempt(), e.GetAnswer())
		}
	}
	research, err := run.Result()
	if err != nil {
		fail(err)
	}
	fmt.Printf("research %s -> %s (retries %d of %d)\n", research.GetResearchId(),
		trim(research.GetOutcome().String(), "RESEARCH_OUTCOME_"), research.GetRetryCount(), research.GetRetryLimit())
	if research.GetError() != "" {
		fmt.Printf("error in %s: %s\n", research.GetErrorComponent(), research.GetError())
	}
	fmt.Printf("final answer: %s\n", research.GetFinalAnswer())
	fmt.Printf("reasoning trace: %s\n", research.GetFinalReasoningTrace())
}

func trim(name, prefix string) string { return strings.TrimPrefix(name, prefix) }

func fail(err error) {
	if fe, ok := frontdesk.AsError(err); ok {
		log.Fatalf("error: %s reason=%s %s", fe.Code, fe.Reason, fe.Message)
	}
	log.Fatal(err)
}
