package maas

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDeployErrorsNeverCarryTheUserData(t *testing.T) {
	token := "eyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyIsInNlY3JldCI6IjAxMjM0NTY3ODkifQ=="
	ud := []byte("#!/bin/sh\necho enrol\n" + token + "\n")
	echo := &APIError{Method: "POST", Path: "/MAAS/api/2.0/machines/abc123/", Op: "deploy", StatusCode: 400,
		Message: "bad user_data: " + token, Fields: map[string][]string{"user_data": {"got " + base64.StdEncoding.EncodeToString(ud)}}, kind: ErrBadRequest}
	err := scrubUserData(fmt.Errorf("deploy: %w", echo), ud)
	if s := err.Error(); strings.Contains(s, token) || strings.Contains(fmt.Sprint(echo.Fields), base64.StdEncoding.EncodeToString(ud)) || !strings.Contains(s, "[user data]") {
		t.Fatalf("scrubbed error still carries the user data: %s %v", s, echo.Fields)
	}
	if !errors.Is(err, ErrBadRequest) {
		t.Fatal("scrubbing lost the error's kind")
	}
}
