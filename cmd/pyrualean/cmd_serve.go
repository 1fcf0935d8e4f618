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
	"strconv"
	"strings"
	"time"

	"github.com/pyrualean/pyrualean/eval"
	"github.com/pyrualean/pyrualean/gateway"
	"github.com/pyrualean/pyrualean/openenv"
)

// listFlag collects a repeatable flag; each value may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// cmdServe runs the Jupyter-compatible kernel gateway until interrupted.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ip := fs.String("ip", "127.0.0.1", "address to bind (use 0.0.0.0 only behind a firewall or in a container)")
	port := fs.Int("port", 8888, "port (0 = any free port)")
	token := fs.String("token", "", "token clients must send (default: $PYRUALEAN_TOKEN, else a random one printed at start)")
	noAuth := fs.Bool("no-auth", false, "serve without a token (trusted networks only)")
	baseURL := fs.String("base-url", "/", "path prefix of every route")
	var origins, envAllow, hosts listFlag
	fs.Var(&hosts, "allow-host", "Host header name accepted besides IP addresses and localhost (repeatable; * = any; guards against DNS rebinding)")
	autoRestart := fs.Bool("autorestart", false, "restart a kernel that died on its own (as jupyter_server's restarter; at most 5 times in a row)")
	fs.Var(&origins, "allow-origin", "extra browser origin allowed for CORS and WebSocket upgrades (repeatable; * = any)")
	fs.Var(&envAllow, "env-allow", "environment name clients may set on kernels besides KERNEL_* (repeatable)")
	maxKernels := fs.Int("max-kernels", 0, "most kernels at once (0 = unlimited)")
	prespawn := fs.Int("prespawn", 0, "kernels of the default spec kept started ahead of requests")
	cullIdle := fs.Float64("cull-idle", 0, "shut down kernels idle (no sockets, not busy) for this many seconds (0 = never)")
	maxMsg := fs.Int64("max-message-bytes", 32<<20, "largest WebSocket message accepted from a client")
	defaultKernel := fs.String("default-kernel", "", "default kernelspec (default: pyrualean, else python3)")
	verbose := fs.Bool("v", false, "debug logging")
	oef := addOpenEnvFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pyrualean serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *noAuth && *token != "" {
		fmt.Fprintln(stderr, "pyrualean serve: --token and --no-auth exclude each other")
		return 2
	}
	if *port < 0 || *port > 65535 || *maxKernels < 0 || *prespawn < 0 || *cullIdle < 0 || *maxMsg <= 0 {
		fmt.Fprintln(stderr, "pyrualean serve: --port, --max-kernels, --prespawn, --cull-idle and --max-message-bytes must be in range")
		return 2
	}
	tok := *token
	if tok == "" && !*noAuth {
		// Read once and drop it from our environment so kernels (which inherit it) never see it.
		tok = os.Getenv("PYRUALEAN_TOKEN")
		os.Unsetenv("PYRUALEAN_TOKEN")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv := gateway.New(gateway.Config{
		Token: tok, NoAuth: *noAuth, BaseURL: *baseURL, AllowOrigins: origins, AllowHosts: hosts, AutoRestart: *autoRestart, MaxKernels: *maxKernels,
		CullIdle: time.Duration(*cullIdle * float64(time.Second)), EnvAllow: envAllow, DefaultKernel: *defaultKernel,
		MaxMessageBytes: *maxMsg, Logger: log,
	})
	oe, err := oef.server(srv, log)
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean serve: %v\n", err)
		srv.Close()
		return 2
	}
	oeCtx, oeStop := context.WithCancel(ctx)
	oeDone := make(chan struct{})
	go func() { // when serve stops, the sessions end (their episodes interrupted) and are waited for
		defer close(oeDone)
		<-oeCtx.Done()
		if oe != nil {
			oe.Close()
			oef.close()
		}
	}()
	if oe != nil {
		srv.Handle("GET /ws", oe)
		for pattern, h := range openenv.Describe(buildVersion()) {
			srv.HandlePublic(pattern, h) // OpenEnv's description routes: no secret, probed before a token
		}
	}
	if err := srv.Prespawn(*prespawn); err != nil {
		fmt.Fprintf(stderr, "pyrualean serve: %v\n", err)
		oeStop()
		<-oeDone
		srv.Close()
		return 1
	}
	addr := net.JoinHostPort(*ip, strconv.Itoa(*port))
	err = srv.ListenAndServe(ctx, addr, func(a net.Addr) {
		printServing(stdout, a, srv, oe != nil)
	})
	oeStop()
	<-oeDone
	if err != nil {
		fmt.Fprintf(stderr, "pyrualean serve: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags parses with a one-line error for bad flags (exit 2) and full usage for -h (exit 0).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage: pyrualean %s [flags]\n", fs.Name())
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	}
	fmt.Fprintf(stderr, "pyrualean %s: %v\n", fs.Name(), err)
	return 2, false
}

// printServing tells the user where the gateway is and how to point Jupyter at it.
func printServing(w io.Writer, a net.Addr, srv *gateway.Server, openEnv bool) {
	host, port, _ := net.SplitHostPort(a.String())
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	u := fmt.Sprintf("http://%s%s", net.JoinHostPort(host, port), strings.TrimSuffix(srv.BaseURL(), "/"))
	fmt.Fprintf(w, "pyrualean gateway serving on %s\n", u)
	if t := srv.Token(); t != "" {
		fmt.Fprintf(w, "token: %s\n", t)
		fmt.Fprintf(w, "  jupyter lab --gateway-url=%s --GatewayClient.auth_token=%s\n", u, t)
	} else {
		fmt.Fprintf(w, "  jupyter lab --gateway-url=%s\n", u)
	}
	if openEnv {
		fmt.Fprintf(w, "openenv: %s/ws (GenericEnvClient(base_url=%q, headers={\"Authorization\": \"token <token>\"}))\n", "ws"+strings.TrimPrefix(u, "http"), u)
	}
}

// buildVersion is this binary's version as one string (module version, and the commit when built from one).
func buildVersion() string {
	v := eval.BuildVersions()
	out := v["pyrualean"]
	if rev := v["vcs.revision"]; rev != "" {
		out += "+" + rev[:min(12, len(rev))]
	}
	return out
}
