package frontdesk_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

// The scripted demo model answers every research purpose with a standing reply
// (tests/fixtures/demo-script.json): a plan of two research steps ("Find who invented CRISPR
// gene editing", "Find when the transistor was invented") and one expert step, every critic
// approving ("Looks complete."), each researcher citing passage 0 of the sample corpus's
// "crispr" document. So every question is answered on the first pass.

const researchQuestion = "Who invented CRISPR gene editing, and when was the transistor invented?"

var (
	researchSteps = []string{"Find who invented CRISPR gene editing", "Find when the transistor was invented"}
	critics       = []string{"critic_planner", "critic_researcher", "critic_researcher", "critic_expert"}
)

// freshQuestion is the question made unique, so that tests sharing the server tell their
// research apart.
func freshQuestion() string {
	return fmt.Sprintf("%s (go %08x)", researchQuestion, rand.Uint32())
}

func ask(t *testing.T, run *frontdesk.Researching, err error) *v1.Research {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.Result()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAQuestionIsAnsweredWithPlanResultsAndCriticDecisions(t *testing.T) {
	c, ctx := client(t)
	question := freshQuestion()
	run, err := c.Ask(ctx, question)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for p := range run.Progress() {
		switch {
		case p.GetEvent() != nil:
			kinds = append(kinds, "event")
		case p.GetMessage() != nil:
			kinds = append(kinds, "message")
		case p.GetPlan() != nil:
			kinds = append(kinds, "plan")
		case p.GetResearchResult() != nil:
			kinds = append(kinds, "result")
		case p.GetCriticDecision() != nil:
			kinds = append(kinds, "critic")
		case p.GetExpertAnswer() != nil:
			kinds = append(kinds, "expert")
		default:
			t.Fatalf("unexpected progress %v", p)
		}
	}
	r, err := run.Result()
	if err != nil {
		t.Fatal(err)
	}
	events := run.Received
	if frontdesk.EventKind(events[0]) != "run_started" || frontdesk.EventKind(events[len(events)-1]) != "run_finished" {
		t.Fatalf("the run's events must start with run_started and end with run_finished: %v", events)
	}
	// a plan comes before any result, every result before the expert's answer
	lastResult := -1
	for i, k := range kinds {
		if k == "result" {
			lastResult = i
		}
	}
	if slices.Index(kinds, "plan") > slices.Index(kinds, "result") || lastResult > slices.Index(kinds, "expert") {
		t.Fatalf("progress out of order: %v", kinds)
	}

	if len(run.Plans) != 1 || !slices.Equal(run.Plans[0].GetResearchSteps(), researchSteps) ||
		!slices.Equal(run.Plans[0].GetExpertSteps(), []string{"Combine the findings"}) || run.Plans[0].GetAttempt() != 1 {
		t.Fatalf("unexpected plans %v", run.Plans)
	}
	var streamed []string
	for _, res := range run.Results {
		streamed = append(streamed, fmt.Sprintf("%d %s", res.GetStepId(), res.GetStep()))
	}
	sort.Strings(streamed)
	if !slices.Equal(streamed, []string{"0 " + researchSteps[0], "1 " + researchSteps[1]}) {
		t.Fatalf("streamed results %v", streamed)
	}
	var names []string
	for _, v := range run.CriticDecisions {
		names = append(names, v.GetCritic())
		if v.GetDecision() != v1.CriticDecision_CRITIC_DECISION_APPROVE || v.GetFeedback() != "Looks complete." || v.GetRetryCount() != 0 {
			t.Fatalf("unexpected critic decision %v", v)
		}
	}
	if !slices.Equal(names, critics) {
		t.Fatalf("critics %v, want %v", names, critics)
	}
	if len(run.ExpertAnswers) != 1 || run.ExpertAnswers[0].GetAnswer() == "" {
		t.Fatalf("unexpected expert answers %v", run.ExpertAnswers)
	}
	first := run.Messages[0]
	if first.GetSender() != "orchestrator" || first.GetReceiver() != "planner" || first.GetType() != "instruction" {
		t.Fatalf("first message %v", first)
	}

	if !strings.HasPrefix(r.GetResearchId(), "RES-") || r.GetQuestion() != question || r.GetCorpus() != "sample" ||
		r.GetOutcome() != v1.ResearchOutcome_RESEARCH_OUTCOME_ANSWERED ||
		r.GetCurrentStep() != v1.ResearchStep_RESEARCH_STEP_FINALIZER ||
		r.GetRetryCount() != 0 || r.GetRetryLimit() != 5 ||
		!strings.HasPrefix(r.GetFinalAnswer(), "Scripted demo:") || r.GetFinalReasoningTrace() == "" ||
		r.GetError() != "" || len(r.GetMessages()) != len(run.Messages) ||
		r.GetExpert().GetAnswer() != run.ExpertAnswers[0].GetAnswer() {
		t.Fatalf("unexpected research %v", r)
	}
	if len(r.GetResults()) != 2 {
		t.Fatalf("want two results, got %v", r.GetResults())
	}
	for i, res := range r.GetResults() {
		if res.GetStepId() != uint32(i) || res.GetStep() != researchSteps[i] || res.GetAnswer() == "" || len(res.GetCitations()) != 1 {
			t.Fatalf("result %d: %v", i, res)
		}
		cit := res.GetCitations()[0]
		if cit.GetDocumentId() != "crispr" || cit.GetPassage() != 0 || cit.GetDocumentTitle() == "" || cit.GetText() == "" {
			t.Fatalf("citation of result %d: %v", i, cit)
		}
	}
}

func TestGetAndListResearch(t *testing.T) {
	c, ctx := client(t)
	var ids []string
	for range 2 {
		run, err := c.Ask(ctx, freshQuestion())
		ids = append(ids, ask(t, run, err).GetResearchId())
	}
	got, err := c.GetResearch(ctx, ids[0])
	if err != nil || got.GetResearchId() != ids[0] || got.GetOutcome() != v1.ResearchOutcome_RESEARCH_OUTCOME_ANSWERED || len(got.GetResults()) != 2 {
		t.Fatalf("GetResearch: %v %v", got, err)
	}

	page, err := c.ListResearch(ctx, &v1.ListResearchRequest{PageSize: 1})
	if err != nil || len(page.GetResearch()) != 1 || page.GetNextPageToken() == "" {
		t.Fatalf("page of 1: %v %v", page, err)
	}
	page2, err := c.ListResearch(ctx, &v1.ListResearchRequest{PageSize: 1, PageToken: page.GetNextPageToken()})
	if err != nil || len(page2.GetResearch()) != 1 || page2.GetResearch()[0].GetResearchId() == page.GetResearch()[0].GetResearchId() {
		t.Fatalf("second page of 1: %v %v", page2, err)
	}
	var listed []string
	for r, err := range c.AllResearch(ctx, 50) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r.GetResearchId())
	}
	for _, id := range ids {
		if !slices.Contains(listed, id) {
			t.Fatalf("%s not in AllResearch", id)
		}
	}
	if !slices.IsSorted(listed) {
		t.Fatalf("AllResearch not ordered by research id: %v", listed)
	}
	_, err = c.ListResearch(ctx, &v1.ListResearchRequest{PageSize: 101})
	wantError(t, err, codes.InvalidArgument, "")
}

func TestAskSendsRetryLimitCorpusAndIdempotencyKey(t *testing.T) {
	c, ctx := client(t)
	run, err := c.Ask(ctx, freshQuestion(), frontdesk.WithRetryLimit(2), frontdesk.WithCorpus("sample"))
	r := ask(t, run, err)
	if r.GetRetryLimit() != 2 || r.GetCorpus() != "sample" || r.GetOutcome() != v1.ResearchOutcome_RESEARCH_OUTCOME_ANSWERED {
		t.Fatalf("unexpected research %v", r)
	}

	question := freshQuestion()
	key := fmt.Sprintf("go-res-%016x", rand.Uint64())
	run, err = c.Ask(ctx, question, frontdesk.WithAskIdempotencyKey(key))
	first := ask(t, run, err)
	run, err = c.Ask(ctx, question, frontdesk.WithAskIdempotencyKey(key))
	again := ask(t, run, err)
	if again.GetResearchId() != first.GetResearchId() || again.GetOutcome() != first.GetOutcome() || again.GetFinalAnswer() != first.GetFinalAnswer() {
		t.Fatalf("want a replay of %v, got %v", first, again)
	}
}

func TestInvalidQuestionsAndUnknownResearch(t *testing.T) {
	c, ctx := client(t)
	_, err := c.Ask(ctx, "")
	wantError(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	_, err = c.Ask(ctx, researchQuestion, frontdesk.WithRetryLimit(21))
	wantError(t, err, codes.InvalidArgument, "")
	_, err = c.Ask(ctx, researchQuestion, frontdesk.WithCorpus(fmt.Sprintf("no-such-corpus-%06x", rand.Uint32()>>8)))
	wantError(t, err, codes.InvalidArgument, "")
	_, err = c.GetResearch(ctx, fmt.Sprintf("RES-go-unknown-%08x", rand.Uint32()))
	wantError(t, err, codes.NotFound, "NOT_FOUND")
}
