// Command investigation investigates an HR mutation that was not authorised, answers as the
// changer and as the manager, then prints the advisory report and the audit trail.
//
//	go run ./examples/investigation [-addr HOST:PORT]
//
// The mutation is given inline with a fresh id (mutation 1002 of the sample HR data, as the
// changer u003 made it: Payroll at Admin, which u003 is not authorised for), so the example can
// run again and again on one server. The address defaults to $FRONTDESK_ADDR, then
// 127.0.0.1:50051; $FRONTDESK_KEY, when set, is the API key.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

func main() {
	def := os.Getenv("FRONTDESK_ADDR")
	if def == "" {
		def = "127.0.0.1:50051"
	}
	addr := flag.String("addr", def, "frontdesk-server address")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := frontdesk.Connect(*addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mutation := &v1.HrMutation{
		MutationId:   fmt.Sprintf("example-go-%010x", rand.Uint64()>>24),
		ChangerId:    "u003",
		TargetUserId: "u007",
		System:       "Payroll",
		AccessLevel:  "Admin",
		ChangeType:   "salary_change",
		Description:  "Raised monthly salary by 4%",
		ChangedAt:    timestamppb.New(time.Date(2025, 11, 10, 14, 30, 0, 0, time.UTC)),
	}
	fmt.Printf("mutation %s: %s changed %s at %s\n", mutation.GetMutationId(), mutation.GetChangerId(), mutation.GetSystem(), mutation.GetAccessLevel())
	inv := follow(c.StartInlineInvestigation(ctx, mutation))
	id := inv.GetInvestigationId()

	// The changer is asked why: find the notification among u003's pending actions.
	// The list is paged, oldest first: AllPendingActions reads every page.
	var changer *v1.PendingAction
	for a, err := range c.AllPendingActions(ctx, "u003", v1.PendingActionStatus_PENDING_ACTION_STATUS_AWAITING, 100) {
		if err != nil {
			fail(err)
		}
		if a.GetInvestigationId() == id {
			changer = a
		}
	}
	if changer == nil {
		log.Fatalf("no pending action of %s for u003", id)
	}
	showAction(changer)
	inv = follow(c.Respond(ctx, frontdesk.ChangerReply(id, changer.GetActionId(), changer.GetRecipientId(),
		"I stood in for Frank (u006), who was on vacation.")))

	// The claim holds, so the changer's manager is asked to approve or deny.
	if len(inv.GetAwaiting()) == 0 {
		log.Fatal("no action awaits the manager")
	}
	manager := inv.GetAwaiting()[0]
	showAction(manager)
	inv = follow(c.Respond(ctx, frontdesk.ManagerReply(id, manager.GetActionId(), manager.GetRecipientId(),
		v1.ManagerDecision_MANAGER_DECISION_APPROVE, "Confirmed with the team.")))

	report := inv.GetReport()
	fmt.Printf("report %s: %s\nsummary: %s\n", report.GetReportId(), trim(report.GetRecommendation().String(), "RECOMMENDATION_"), report.GetSummary())
	trail, err := c.GetAuditTrail(ctx, id)
	if err != nil {
		fail(err)
	}
	fmt.Printf("audit trail (%d entries):\n", len(trail))
	for _, e := range trail {
		fmt.Printf("  %3d %-30s %s\n", e.GetSeq(), e.GetActor(), entryKind(e))
	}
}

// follow prints the run's progress as it arrives and returns the investigation.
func follow(run *frontdesk.Investigating, err error) *v1.Investigation {
	if err != nil {
		fail(err)
	}
	for p := range run.Progress() {
		switch {
		case p.GetEvent() != nil:
			ev := p.GetEvent()
			kind := frontdesk.EventKind(ev)
			switch kind {
			case "node_started", "tool_called", "run_interrupted", "run_finished":
				detail := ""
				if tc := ev.GetToolCalled(); tc != nil {
					detail = " " + tc.GetName()
				}
				fmt.Printf("  event %3d %-17s %s%s\n", ev.GetEventId(), kind, ev.GetNode(), detail)
			}
		case p.GetMessage() != nil:
			m := p.GetMessage()
			fmt.Printf("  message %s -> %s: %s (%s)\n", trim(m.GetSender().String(), "AGENT_"), trim(m.GetReceiver().String(), "AGENT_"),
				trim(m.GetAction().String(), "AGENT_ACTION_"), trim(m.GetStatus().String(), "AGENT_MESSAGE_STATUS_"))
		case p.GetStatusChange() != nil:
			sc := p.GetStatusChange()
			fmt.Printf("  status %s -> %s\n", status(sc.GetFrom()), status(sc.GetTo()))
		}
	}
	inv, err := run.Result()
	if err != nil {
		fail(err)
	}
	fmt.Printf("investigation %s -> %s\n", inv.GetInvestigationId(), status(inv.GetStatus()))
	return inv
}

func showAction(a *v1.PendingAction) {
	fmt.Printf("pending action %s for %s (%s): %s\n", a.GetActionId(), a.GetRecipientId(),
		trim(a.GetRecipientRole().String(), "RESPONDER_ROLE_"), a.GetSubject())
}

func entryKind(e *v1.AuditEntry) string {
	switch e.GetEntry().(type) {
	case *v1.AuditEntry_Message:
		return "message"
	case *v1.AuditEntry_StatusChange:
		return "status_change"
	case *v1.AuditEntry_Tool:
		return "tool"
	case *v1.AuditEntry_Notification:
		return "notification"
	case *v1.AuditEntry_Reply:
		return "reply"
	case *v1.AuditEntry_Error:
		return "error"
	default:
		return ""
	}
}

func status(s v1.InvestigationStatus) string { return trim(s.String(), "INVESTIGATION_STATUS_") }

func trim(name, prefix string) string { return strings.TrimPrefix(name, prefix) }

func fail(err error) {
	if fe, ok := frontdesk.AsError(err); ok {
		log.Fatalf("error: %s reason=%s %s", fe.Code, fe.Reason, fe.Message)
	}
	log.Fatal(err)
}
