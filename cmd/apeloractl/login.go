package main

// Signing in through single sign-on (the device authorization grant), and out.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var (
	loginCommand = &command{
		name: "login", offline: true,
		doc: "sign in through the server's single sign-on (device\nauthorization grant): prints a code to approve at the\nidentity provider, then keeps a short-lived Apelora\nsession token (mode 0600), never the provider's tokens",
		run: func(c *cli, ctx context.Context, _ []string) error { return login(ctx, c.base, c.out) },
	}
	logoutCommand = &command{
		name: "logout", offline: true, doc: "end that session (on the server too) and remove it",
		run: func(c *cli, ctx context.Context, _ []string) error { return logout(ctx, c.base, c.out) },
	}
)

// sessionFile is where `apeloractl login` keeps its Apelora session token: the user's
// config folder, mode 0600. It holds an Apelora session (aps_…, ended by its expiry, a
// revocation of the identity, or `apeloractl logout`), never a token of the identity
// provider: the server redeems the device code and keeps nothing of the provider's.
func sessionFile() (string, error) {
	if p := os.Getenv("APELORA_SESSION_FILE"); p != "" {
		return p, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config folder for the session token: %w (or set APELORA_SESSION_FILE)", err)
	}
	return filepath.Join(d, "apelora", "session"), nil
}

// savedSession is the token `apeloractl login` kept, or "" when there is none.
func savedSession() string {
	p, err := sessionFile()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// login signs in through the identity provider with the device authorization grant: it
// prints where to approve the sign-in and the code to enter, then waits for the server to
// answer the session token, which it keeps in sessionFile.
func login(ctx context.Context, base string, out io.Writer) error {
	var start struct {
		DeviceCode              string    `json:"deviceCode"`
		UserCode                string    `json:"userCode"`
		VerificationURI         string    `json:"verificationUri"`
		VerificationURIComplete string    `json:"verificationUriComplete"`
		ExpiresAt               time.Time `json:"expiresAt"`
		Interval                int       `json:"interval"`
	}
	if _, err := postJSON(ctx, base+"/api/v1/session/device", map[string]any{}, &start); err != nil {
		return err
	}
	fmt.Fprintf(out, "To sign in, open %s\nand enter the code %s", start.VerificationURI, start.UserCode)
	if start.VerificationURIComplete != "" {
		fmt.Fprintf(out, " (or open %s)", start.VerificationURIComplete)
	}
	fmt.Fprintf(out, "\nwaiting for the sign-in (until %s)…\n", start.ExpiresAt.Local().Format(time.TimeOnly))
	for {
		var got struct {
			Token     string    `json:"token"`
			Identity  string    `json:"identity"`
			ExpiresAt time.Time `json:"expiresAt"`
		}
		status, err := postJSON(ctx, base+"/api/v1/session/device/token", map[string]any{"deviceCode": start.DeviceCode, "interval": start.Interval}, &got)
		if err != nil {
			return err
		}
		if status == http.StatusAccepted {
			continue // the server waited a while for the approval: ask again
		}
		p, err := sessionFile()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("keep the session token: %w", err)
		}
		// Written 0600 from the start (never readable by others, even for a moment).
		if err := os.WriteFile(p+".tmp", []byte(got.Token+"\n"), 0o600); err != nil {
			return fmt.Errorf("keep the session token: %w", err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return fmt.Errorf("keep the session token: %w", err)
		}
		fmt.Fprintf(out, "signed in as %s until %s; the session token is in %s\n", got.Identity, got.ExpiresAt.Local().Format(time.DateTime), p)
		return nil
	}
}

// postJSON posts body and decodes a 2xx answer into out; an error answer becomes an
// *apiError with the server's code and message.
func postJSON(ctx context.Context, url string, body, out any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		if u := unreachable(baseURL(), err); u != nil {
			return 0, u
		}
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
			return resp.StatusCode, errors.New(resp.Status + ": " + strings.TrimSpace(string(raw)))
		}
		return resp.StatusCode, &apiError{errs: []codedMessage{{e.Error.Code, e.Error.Message}}}
	}
	return resp.StatusCode, json.Unmarshal(raw, out)
}

// logout ends the session `apeloractl login` kept, on the server (its sockets close on every
// replica) and in the config folder.
func logout(ctx context.Context, base string, out io.Writer) error {
	p, err := sessionFile()
	if err != nil {
		return err
	}
	token := savedSession()
	if token == "" {
		fmt.Fprintln(out, "not signed in (no session token in "+p+")")
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/api/v1/session", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return &apiError{errs: []codedMessage{{"UNAVAILABLE", fmt.Sprintf("Apelora could not be reached at %s to end the session: %v (the token was kept)", base, err)}}}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("end the session: the server answered %s (the token was kept)", resp.Status)
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("the session ended, but its token could not be removed: %w", err)
	}
	fmt.Fprintln(out, "signed out: the session ended")
	return nil
}
