// Command triage triages one customer message and prints the ticket resolution, the run's
// events and the result.
//
//	go run ./examples/triage [-addr HOST:PORT] [-customer CUST-001] [MESSAGE]
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
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

func main() {
	def := os.Getenv("FRONTDESK_ADDR")
	if def == "" {
		def = "127.0.0.1:50051"
	}
	addr := flag.String("addr", def, "frontdesk-server address")
	customer := flag.String("customer", "CUST-001", "customer id")
	flag.Parse()
	text := strings.Join(flag.Args(), " ")
	if text == "" {
		text = "I was charged twice for my subscription this month."
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := frontdesk.Connect(*addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fmt.Printf("customer %s: %s\n", *customer, text)
	tr, err := c.TriageTicket(ctx, *customer, text, frontdesk.WithSubject("Billing question"))
	if err != nil {
		fail(err)
	}
	kind := "new"
	if tr.Resolution().GetMatchedExisting() {
		kind = "continues"
	}
	fmt.Printf("ticket %s (%s)\n", tr.Resolution().GetTicketId(), kind)
	for ev := range tr.Events() {
		detail := ""
		if tc := ev.GetToolCalled(); tc != nil {
			detail = " " + tc.GetName()
		}
		fmt.Printf("  event %2d %-17s %s%s\n", ev.GetEventId(), frontdesk.EventKind(ev), ev.GetNode(), detail)
	}
	result, err := tr.Result()
	if err != nil {
		fail(err)
	}
	fmt.Printf("result: %s -> %s\nsuggested response: %s\n", result.GetRecommendedAction(), result.GetStatus(), result.GetSuggestedResponse())
	page, err := c.ListTickets(ctx, &v1.ListTicketsRequest{CustomerId: *customer, PageSize: 5})
	if err != nil {
		fail(err)
	}
	var ids []string
	for _, t := range page.GetTickets() {
		ids = append(ids, t.GetTicketId())
	}
	fmt.Printf("recent tickets: %s\n", strings.Join(ids, ", "))
}

func fail(err error) {
	if fe, ok := frontdesk.AsError(err); ok {
		log.Fatalf("error: %s reason=%s %s", fe.Code, fe.Reason, fe.Message)
	}
	log.Fatal(err)
}
