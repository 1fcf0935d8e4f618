package rayservice

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/eval/rayjob"
)

// TestEnsure: with no service of this version on the cluster, Ensure uploads the service's files,
// submits it (the port and the nodes' pyrualean in its entrypoint, quoted), waits for its line and
// checks it answers with the token; a service that fails before listening is an error with its
// log's last lines; one listening where eval cannot reach it says so.
func TestEnsure(t *testing.T) {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer svc.Close()
	port := svc.Listener.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	var spec rayjob.Spec
	var pkg []byte
	status, logs := "RUNNING", ""
	dash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/api/jobs/" && r.Method == "GET":
			w.Write([]byte(`[{"submission_id":"other","status":"RUNNING","metadata":{"pyrualean":"service","version":"0ld"}}]`))
		case r.URL.Path == "/api/jobs/" && r.Method == "POST":
			json.NewDecoder(r.Body).Decode(&spec)
			json.NewEncoder(w).Encode(map[string]string{"submission_id": spec.SubmissionID})
		case strings.HasPrefix(r.URL.Path, "/api/packages/gcs/"):
			pkg, _ = io.ReadAll(r.Body)
		case strings.HasSuffix(r.URL.Path, "/logs"):
			json.NewEncoder(w).Encode(map[string]string{"logs": logs})
		case strings.HasPrefix(r.URL.Path, "/api/jobs/"):
			json.NewEncoder(w).Encode(map[string]string{"status": status, "message": "driver exited"})
		default:
			http.Error(w, "no", http.StatusNotFound)
		}
	}))
	defer dash.Close()
	c, err := rayjob.New(dash.URL)
	if err != nil {
		t.Fatal(err)
	}
	go func() { // the service starts listening a moment after its submission
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		logs = fmt.Sprintf("booting\n%s{\"port\":%d,\"token\":\"tok\"}\n", linePrefix, port)
		mu.Unlock()
	}()
	ctx := context.Background()
	s, err := Ensure(ctx, c, Options{Python: "/opt/py/bin/python", Port: 9000, Pyrualean: "/opt/it's/pyrualean"})
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != fmt.Sprintf("http://127.0.0.1:%d", port) || !strings.HasPrefix(s.Job, "pyrualean-service-"+Version()) {
		t.Errorf("service %+v", s)
	}
	if want := `/opt/py/bin/python ray_service.py --port 9000 --pyrualean '/opt/it'\''s/pyrualean'`; spec.Entrypoint != want {
		t.Errorf("entrypoint %q, want %q", spec.Entrypoint, want)
	}
	if spec.Metadata["pyrualean"] != "service" || spec.Metadata["version"] != Version() || spec.RuntimeEnv["working_dir"] == nil {
		t.Errorf("spec %+v", spec)
	}
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil || len(zr.File) != 2 {
		t.Fatalf("the service's package: %v", err)
	}

	// It fails before listening: the error says so, with its log.
	mu.Lock()
	status, logs = "FAILED", "Traceback ...\nOSError: [Errno 98] Address already in use\n"
	mu.Unlock()
	if _, err := find(ctx, c, "x"); err == nil || !strings.Contains(err.Error(), "FAILED") || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("failed service: %v", err)
	}
	// It listens where this machine cannot reach it (a closed port).
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	mu.Lock()
	status, logs = "RUNNING", fmt.Sprintf("%s{\"port\":%d,\"token\":\"tok\"}\n", linePrefix, closed)
	mu.Unlock()
	if _, err := find(ctx, c, "x"); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("unreachable service: %v", err)
	}
}
