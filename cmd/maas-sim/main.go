// Command maas-sim serves the MAAS 2.0 API simulator (adapters/maas/sim) for
// development and end-to-end tests.
//
//	MAAS_SIM_API_KEY_FILE=/run/apelora/maas.key maas-sim -listen 127.0.0.1:5240 \
//	    -fixture machines.json -tls leaf -cert-out /run/apelora/maas-ca.pem
//
// The API key comes from $MAAS_SIM_API_KEY, or the file named by -key-file /
// $MAAS_SIM_API_KEY_FILE; with -write-key a new key is generated into that
// file (mode 0600). The key is never printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "maas-sim:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("maas-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", envOr("MAAS_SIM_LISTEN", "127.0.0.1:5240"), "listen address ($MAAS_SIM_LISTEN)")
	fixture := fs.String("fixture", os.Getenv("MAAS_SIM_FIXTURE"), "fixture JSON file ($MAAS_SIM_FIXTURE)")
	generate := fs.Int("generate", 0, "add N generated machines (deterministic; for load tests)")
	seed := fs.Uint64("seed", 1, "seed for -generate")
	keyFile := fs.String("key-file", os.Getenv("MAAS_SIM_API_KEY_FILE"), "file holding the API key consumer:token:secret ($MAAS_SIM_API_KEY_FILE)")
	writeKey := fs.Bool("write-key", false, "generate a new API key into -key-file (mode 0600) instead of reading one")
	username := fs.String("username", envOr("MAAS_SIM_USERNAME", "apelora"), "MAAS user owning the key")
	admin := fs.Bool("admin", true, "the user is a MAAS administrator (commission and test need it)")
	tlsMode := fs.String("tls", envOr("MAAS_SIM_TLS", "leaf"), "none | leaf (self-signed leaf) | ca-signed | ca-marked")
	certOut := fs.String("cert-out", os.Getenv("MAAS_SIM_CERT_OUT"), "write the PEM a client must trust here (the leaf, or the CA for ca-signed)")
	hosts := fs.String("cert-hosts", "", "extra comma-separated host names or IPs for the certificate")
	d := sim.DefaultDurations
	fs.DurationVar(&d.Commissioning, "commissioning", d.Commissioning, "time spent Commissioning")
	fs.DurationVar(&d.Testing, "testing", d.Testing, "time spent Testing")
	fs.DurationVar(&d.Deploying, "deploying", d.Deploying, "time spent Deploying")
	fs.DurationVar(&d.Releasing, "releasing", d.Releasing, "time spent Releasing")
	fs.DurationVar(&d.DiskErasing, "disk-erasing", d.DiskErasing, "time spent Disk erasing")
	fs.DurationVar(&d.PowerOff, "power-off-delay", d.PowerOff, "delay before an accepted power_off takes effect")
	verbose := fs.Bool("v", false, "log every request (method, path, op, parameter names; never credentials)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	key, err := loadKey(*keyFile, *writeKey)
	if err != nil {
		return err
	}
	var fx sim.Fixture
	if *fixture != "" {
		if fx, err = sim.LoadFixture(*fixture); err != nil {
			return err
		}
	}
	if *generate > 0 {
		fx.Machines = append(fx.Machines, sim.GenerateMachines(*generate, *seed)...)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	s, err := sim.New(sim.Options{
		Users:     []sim.User{{Username: *username, APIKey: key, Admin: *admin}},
		Fixture:   fx,
		Durations: d,
		Logger:    logger,
	})
	if err != nil {
		return err
	}

	var ep *sim.Endpoint
	switch *tlsMode {
	case "none":
		ep, err = s.Listen(*listen)
	case "leaf", "ca-signed", "ca-marked":
		mode := map[string]sim.TLSMode{"leaf": sim.TLSSelfSignedLeaf, "ca-signed": sim.TLSCASignedLeaf, "ca-marked": sim.TLSCAMarked}[*tlsMode]
		host, _, _ := net.SplitHostPort(*listen)
		var certs *sim.Certificates
		certs, err = sim.GenerateCertificates(mode, 365*24*time.Hour, append(splitList(*hosts), host)...)
		if err == nil {
			ep, err = s.ListenWithCertificates(*listen, certs)
		}
	default:
		return fmt.Errorf("-tls %q: use none, leaf, ca-signed or ca-marked", *tlsMode)
	}
	if err != nil {
		return err
	}
	defer ep.Close()
	if ep.Certs != nil && *certOut != "" {
		if err := os.WriteFile(*certOut, ep.Certs.CAPEM, 0o644); err != nil {
			return fmt.Errorf("write certificate to %s: %w", *certOut, err)
		}
	}
	fmt.Fprintf(stdout, "maas-sim listening on %s (%d machines", ep.BaseURL, len(fx.Machines))
	if ep.Certs != nil && *certOut != "" {
		fmt.Fprintf(stdout, "; trust %s", *certOut)
	}
	fmt.Fprintln(stdout, ")")

	<-ctx.Done()
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// loadKey never includes the key in an error.
func loadKey(file string, write bool) (string, error) {
	if write {
		if file == "" {
			return "", errors.New("-write-key needs -key-file")
		}
		key := sim.NewAPIKey()
		if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write API key file: %w", err)
		}
		return key, nil
	}
	if k := strings.TrimSpace(os.Getenv("MAAS_SIM_API_KEY")); k != "" {
		return k, nil
	}
	if file == "" {
		return "", errors.New("no API key: set MAAS_SIM_API_KEY, or -key-file (with -write-key to generate one)")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read API key file: %w", err)
	}
	k := strings.TrimSpace(string(b))
	if strings.Count(k, ":") != 2 {
		return "", fmt.Errorf("API key file %s must hold consumer:token:secret", file)
	}
	return k, nil
}
