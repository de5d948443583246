// Command chat starts a conversation, sends a turn and prints the run's events as they arrive.
//
//	go run ./examples/chat [-addr HOST:PORT] [MESSAGE]
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
	flag.Parse()
	text := strings.Join(flag.Args(), " ")
	if text == "" {
		text = "Hi! What can you help me with?"
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := frontdesk.Connect(*addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	started, err := c.StartConversation(ctx, "intake")
	if err != nil {
		log.Fatal(err)
	}
	id := started.GetConversation().GetConversationId()
	fmt.Printf("conversation %s\nassistant: %s\nuser: %s\n", id, started.GetWelcome().GetText(), text)

	turn := c.SendMessage(ctx, id, text)
	for ev := range turn.Events() {
		kind := frontdesk.EventKind(ev)
		if kind == "token_delta" {
			continue // the streamed reply; the result carries it whole
		}
		fmt.Printf("  event %2d %-17s %s\n", ev.GetEventId(), kind, ev.GetNode())
	}
	result, err := turn.Result()
	if err != nil {
		if fe, ok := frontdesk.AsError(err); ok {
			log.Fatalf("error: %s reason=%s %s", fe.Code, fe.Reason, fe.Message)
		}
		log.Fatal(err)
	}
	fmt.Printf("assistant (%s): %s\nturns so far: %d\n", result.GetReply().GetNode(), result.GetReply().GetText(), result.GetConversation().GetTurnCount())
}
