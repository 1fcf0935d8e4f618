package kernel

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/uuid"
)

// ConnectionInfo is the content of a kernel connection file.
type ConnectionInfo struct {
	IP              string `json:"ip"`
	Transport       string `json:"transport"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name,omitempty"`
}

// ReadConnectionFile reads a connection file written by us, jupyter_client or a kernel.
func ReadConnectionFile(path string) (ConnectionInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ConnectionInfo{}, fmt.Errorf("kernel: read connection file: %w", err)
	}
	var ci ConnectionInfo
	if err := json.Unmarshal(b, &ci); err != nil {
		return ConnectionInfo{}, fmt.Errorf("kernel: parse connection file %s: %w", path, err)
	}
	if ci.Transport == "" {
		ci.Transport = "tcp"
	}
	if ci.IP == "" {
		ci.IP = "127.0.0.1"
	}
	if ci.ShellPort == 0 || ci.IOPubPort == 0 || ci.StdinPort == 0 || ci.ControlPort == 0 || ci.HBPort == 0 {
		return ConnectionInfo{}, fmt.Errorf("kernel: connection file %s lacks a port", path)
	}
	return ci, nil
}

// endpoint returns the ZeroMQ address of a port (ipc uses the port as a path suffix).
func (ci ConnectionInfo) endpoint(port int) string {
	if ci.Transport == "ipc" {
		return fmt.Sprintf("ipc://%s-%d", ci.IP, port)
	}
	return fmt.Sprintf("%s://%s:%d", ci.Transport, ci.IP, port)
}

// newConnectionInfo picks five free ports on 127.0.0.1 (all held open together, so they differ)
// and a random key.
func newConnectionInfo() (ConnectionInfo, error) {
	ports := make([]int, 5)
	ls := make([]net.Listener, 0, 5)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("kernel: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ConnectionInfo{
		IP: "127.0.0.1", Transport: "tcp",
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		Key: uuid.NewString(), SignatureScheme: "hmac-sha256",
	}, nil
}

// runtimeDir is where connection files go, as in jupyter_core.
func runtimeDir() string {
	if d := os.Getenv("JUPYTER_RUNTIME_DIR"); d != "" {
		return d
	}
	return filepath.Join(userDataDir(), "runtime")
}

// ownedPrefix starts the name of every connection file we write: kernel-pyrualean-<our pid>-<uuid>.json.
// The owner's pid in the name lets a later launch remove the files of an owner that was killed
// (SIGKILL leaves no chance to clean up); jupyter_client's kernel-<uuid>.json files are never touched.
const ownedPrefix = "kernel-pyrualean-"

// writeConnectionFile writes ci to a new connection file readable by the owner only, first removing
// the stale files of dead owners.
func writeConnectionFile(ci ConnectionInfo) (string, error) {
	dir := runtimeDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("kernel: runtime dir: %w", err)
	}
	removeStaleConnectionFiles(dir)
	path := filepath.Join(dir, ownedPrefix+strconv.Itoa(os.Getpid())+"-"+uuid.NewString()+".json")
	b, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("kernel: write connection file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("kernel: write connection file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("kernel: write connection file: %w", err)
	}
	return path, nil
}

// removeStaleConnectionFiles deletes our connection files whose owner process no longer exists.
func removeStaleConnectionFiles(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), ownedPrefix)
		if !ok || !strings.HasSuffix(rest, ".json") {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// rewriteConnectionFile replaces the content of an existing connection file (new ports on retry).
func rewriteConnectionFile(path string, ci ConnectionInfo) error {
	b, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("kernel: write connection file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kernel: write connection file: %w", err)
	}
	return nil
}
