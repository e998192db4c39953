# Convenience targets; the scripts are what the README and CI use (a fresh Debian machine
# has no make).
.PHONY: run test generate build vet

run:
	scripts/run.sh

test:
	scripts/test.sh

generate:
	go generate ./...

build:
	go build -o bin/ ./cmd/...

vet:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...
