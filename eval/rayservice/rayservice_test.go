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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyrualean/pyrualean/eval/rayjob"
)

// TestEnsure: with no service of this version and token on the cluster, Ensure makes the user's
// token (0600), uploads the service's files with it, submits the service (the port and the nodes'
// pyrualean in its entrypoint, quoted; the token's hash, never the token, in its details), waits
// for its line and checks it answers with the token; a service that fails before listening is an
// error with its log's last lines; one listening where eval cannot reach it says so.
func TestEnsure(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "cache", "ray-service-token")
	var token string
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
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
			// another version's, and this version's of another user (another token)
			fmt.Fprintf(w, `[{"submission_id":"other","status":"RUNNING","metadata":{"pyrualean":"service","version":"0ld"}},
				{"submission_id":"theirs","status":"RUNNING","metadata":{"pyrualean":"service","version":%q,"token":"x"}}]`, Version())
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
		logs = fmt.Sprintf("booting\n%s{\"port\":%d}\n", linePrefix, port)
		mu.Unlock()
	}()
	ctx := context.Background()
	o := Options{Python: "/opt/py/bin/python", Port: 9000, Pyrualean: "/opt/it's/pyrualean", TokenFile: tokFile}
	tok, err := o.token()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	token = tok
	mu.Unlock()
	if st, err := os.Stat(tokFile); err != nil || st.Mode().Perm() != 0o600 || len(tok) != 64 {
		t.Fatalf("token file: %v %v", st, err)
	}
	s, err := Ensure(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != fmt.Sprintf("http://127.0.0.1:%d", port) || !strings.HasPrefix(s.Job, "pyrualean-service-"+Version()) {
		t.Errorf("service %+v", s)
	}
	if want := `/opt/py/bin/python ray_service.py --port 9000 --pyrualean '/opt/it'\''s/pyrualean'`; spec.Entrypoint != want {
		t.Errorf("entrypoint %q, want %q", spec.Entrypoint, want)
	}
	if spec.Metadata["pyrualean"] != "service" || spec.Metadata["version"] != Version() || spec.Metadata["token"] != TokenHash(tok) ||
		spec.RuntimeEnv["working_dir"] == nil {
		t.Errorf("spec %+v", spec)
	}
	if b, _ := json.Marshal(spec); bytes.Contains(b, []byte(tok)) {
		t.Errorf("the token is in the job's details: %s", b)
	}
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil || len(zr.File) != 3 {
		t.Fatalf("the service's package: %v", err)
	}
	f, _ := zr.Open("token")
	if b, _ := io.ReadAll(f); string(b) != tok {
		t.Errorf("the package's token %q", b)
	}
	if again, _ := o.token(); again != tok {
		t.Error("the token changed between two reads")
	}
	bad := filepath.Join(t.TempDir(), "token")
	os.WriteFile(bad, []byte("short\n"), 0o600)
	if _, err := (Options{TokenFile: bad}).token(); err == nil || !strings.Contains(err.Error(), "holds no token") {
		t.Errorf("a file without a token: %v", err)
	}

	// It fails before listening: the error says so, with its log.
	mu.Lock()
	status, logs = "FAILED", "Traceback ...\nOSError: [Errno 98] Address already in use\n"
	mu.Unlock()
	if _, err := find(ctx, c, "x", tok); err == nil || !strings.Contains(err.Error(), "FAILED") || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("failed service: %v", err)
	}
	// It listens where this machine cannot reach it (a closed port).
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	mu.Lock()
	status, logs = "RUNNING", fmt.Sprintf("%s{\"port\":%d}\n", linePrefix, closed)
	mu.Unlock()
	if _, err := find(ctx, c, "x", tok); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("unreachable service: %v", err)
	}
}
