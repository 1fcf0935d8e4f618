package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// AttachOptions say which kernel to open in which Jupyter Server. The Jupyter Server must run with
// --gateway-url pointing at this gateway: it hides gateway kernels it did not start, but adopts one
// when a session names its id (GatewayKernelManager "using existing kernel").
type AttachOptions struct {
	ServerURL   string // the user's Jupyter Server / JupyterLab, e.g. http://127.0.0.1:8888
	ServerToken string
	KernelID    string // the gateway's id for the live kernel
	Path        string // notebook path on the server, e.g. "episodes/ep1.ipynb"
	Notebook    []byte // .ipynb to upload at Path first (the episode trace); nil keeps what is there
	HTTPClient  *http.Client
}

// AttachResult is the session made and the URL that opens the notebook on the live kernel.
type AttachResult struct {
	SessionID string `json:"session_id"`
	KernelID  string `json:"kernel_id"`
	Path      string `json:"path"`
	URL       string `json:"url"`
}

// Attach uploads the notebook (when given) and creates a session for Path on the kernel, so that
// opening Path in JupyterLab connects to the live kernel.
func Attach(ctx context.Context, o AttachOptions) (AttachResult, error) {
	if o.ServerURL == "" || o.KernelID == "" || o.Path == "" {
		return AttachResult{}, fmt.Errorf("attach: server URL, kernel id and notebook path are required")
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	base := strings.TrimRight(o.ServerURL, "/")
	path := strings.TrimLeft(o.Path, "/")
	call := func(method, p string, body any, out any) error {
		raw, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, method, base+p, bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if o.ServerToken != "" {
			req.Header.Set("Authorization", "token "+o.ServerToken)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("attach: %s %s: %w", method, p, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode >= 300 {
			return fmt.Errorf("attach: %s %s: HTTP %d: %s", method, p, resp.StatusCode, bytes.TrimSpace(data))
		}
		if out != nil {
			return json.Unmarshal(data, out)
		}
		return nil
	}
	if o.Notebook != nil {
		var nb json.RawMessage = o.Notebook
		if !json.Valid(nb) {
			return AttachResult{}, fmt.Errorf("attach: the notebook to upload is not JSON")
		}
		// Make the parent folders, then the notebook (contents API: PUT creates or replaces).
		parts := strings.Split(path, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/")
			_ = call("PUT", "/api/contents/"+escapePath(dir), map[string]any{"type": "directory"}, nil)
		}
		if err := call("PUT", "/api/contents/"+escapePath(path), map[string]any{"type": "notebook", "format": "json", "content": nb}, nil); err != nil {
			return AttachResult{}, err
		}
	}
	var sess struct {
		ID     string `json:"id"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	body := map[string]any{"path": path, "type": "notebook", "name": "", "kernel": map[string]string{"id": o.KernelID}}
	if err := call("POST", "/api/sessions", body, &sess); err != nil {
		return AttachResult{}, err
	}
	if sess.Kernel.ID != o.KernelID {
		return AttachResult{}, fmt.Errorf("attach: the server bound %s to kernel %s, not %s (is it running with --gateway-url pointing at this gateway?)", path, sess.Kernel.ID, o.KernelID)
	}
	u := base + "/lab/tree/" + escapePath(path)
	if o.ServerToken != "" {
		u += "?token=" + url.QueryEscape(o.ServerToken)
	}
	return AttachResult{SessionID: sess.ID, KernelID: o.KernelID, Path: path, URL: u}, nil
}

// ErrNoLiveDocuments means the Jupyter Server cannot keep a live document: it lacks pyrualean's server
// extension (pyrualean_lab) or jupyter-collaboration.
var ErrNoLiveDocuments = errors.New("the Jupyter Server has no live documents (install pyrualean_lab and jupyter-collaboration in its environment: scripts/setup.sh does)")

// AttachLive asks the Jupyter Server's pyrualean extension to make o.Path the live document of the
// episode (POST /pyrualean/api/episodes/{id}/live): it writes the trace there, binds a session to the
// episode's kernel and keeps writing the agent's cells into the shared document as they run.
func AttachLive(ctx context.Context, o AttachOptions, episodeID string) (AttachResult, error) {
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	base := strings.TrimRight(o.ServerURL, "/")
	raw, _ := json.Marshal(map[string]string{"path": strings.TrimLeft(o.Path, "/")})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/pyrualean/api/episodes/"+url.PathEscape(episodeID)+"/live", bytes.NewReader(raw))
	if err != nil {
		return AttachResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.ServerToken != "" {
		req.Header.Set("Authorization", "token "+o.ServerToken)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return AttachResult{}, fmt.Errorf("attach: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		Path      string `json:"path"`
		KernelID  string `json:"kernel_id"`
		SessionID string `json:"session_id"`
		Message   string `json:"message"`
	}
	_ = json.Unmarshal(data, &out)
	switch {
	case resp.StatusCode == http.StatusNotFound && out.Message == "":
		return AttachResult{}, ErrNoLiveDocuments // no such route: the extension is not there
	case resp.StatusCode == http.StatusNotFound && strings.Contains(out.Message, "jupyter-collaboration"):
		return AttachResult{}, fmt.Errorf("%w: %s", ErrNoLiveDocuments, out.Message)
	case resp.StatusCode >= 300:
		msg := out.Message
		if msg == "" {
			msg = strings.TrimSpace(string(data))
		}
		return AttachResult{}, fmt.Errorf("attach: live document: HTTP %d: %s", resp.StatusCode, msg)
	}
	u := base + "/lab/tree/" + escapePath(out.Path)
	if o.ServerToken != "" {
		u += "?token=" + url.QueryEscape(o.ServerToken)
	}
	return AttachResult{SessionID: out.SessionID, KernelID: out.KernelID, Path: out.Path, URL: u}, nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// EpisodeRef names a live episode on a gateway: its id, its kernel's gateway id and its trace path.
type EpisodeRef struct{ ID, KernelID, Trace string }

// FindEpisode reads /api/episodes from the gateway and picks the episode (the only one when id is "").
func FindEpisode(ctx context.Context, base, token, id string) (EpisodeRef, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(base, "/")+"/api/episodes", nil)
	if err != nil {
		return EpisodeRef{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return EpisodeRef{}, fmt.Errorf("asking the gateway for episodes: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != 200 {
		return EpisodeRef{}, fmt.Errorf("gateway %s/api/episodes: HTTP %d: %s", base, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var eps []map[string]any
	if err := json.Unmarshal(raw, &eps); err != nil {
		return EpisodeRef{}, fmt.Errorf("gateway episodes: %w", err)
	}
	str := func(m map[string]any, keys ...string) string {
		for _, k := range keys {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
		return ""
	}
	var ids []string
	for _, e := range eps {
		eid := str(e, "id")
		ids = append(ids, eid)
		if id == "" && len(eps) == 1 || eid == id {
			return EpisodeRef{ID: eid, KernelID: str(e, "kernel_id"), Trace: str(e, "trace_path", "trace", "notebook")}, nil
		}
	}
	if id == "" {
		return EpisodeRef{}, fmt.Errorf("the gateway has %d live episodes (%s): pick one with --episode", len(eps), strings.Join(ids, ", "))
	}
	return EpisodeRef{}, fmt.Errorf("no live episode %q on the gateway (have: %s)", id, strings.Join(ids, ", "))
}
