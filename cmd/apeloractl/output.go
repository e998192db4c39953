package main

// How apeloractl prints what the API answers (a table, or JSON with -json), and follows a
// subscription.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
)

func (c *cli) print(v any, table func(*tabwriter.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

// follow opens a websocket, subscribes with subscribe and hands every event to handle
// until the context ends, the server ends the subscription, or handle fails.
func follow[E any](ctx context.Context, c *cli, subscribe func(graphql.WebSocketClient) (chan E, error), handle func(E) error) error {
	// A websocket refused at connection_init says only 4403: ask over HTTP first, which
	// says UNAUTHENTICATED or FORBIDDEN.
	if _, err := client.Viewer(ctx, c.gql); err != nil {
		return err
	}
	ws, err := client.NewWebSocket(c.endpoint, c.token)
	if err != nil {
		return err
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	events, err := subscribe(ws)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return fmt.Errorf("subscription ended: %w", err)
		case ev, ok := <-events:
			if !ok {
				return errors.New("the server ended the subscription")
			}
			if err := handle(ev); err != nil {
				return err
			}
		}
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func str(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}
