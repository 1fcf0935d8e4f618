package runtimes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/pyrualean/pyrualean/agent"
)

// providerDoer is the openai.HTTPDoer the production go-openai client runs through. go-openai has no
// generic extra body, drops temperature 0 (omitempty), drops top-level usage.reasoning_tokens and the
// `reasoning` key, and has no retries; this fills those gaps at the HTTP layer:
//   - merges Extra into every JSON request body (after go-openai's own fields, so Extra wins);
//   - retries 408/409/429/5xx and transport errors with exponential backoff + jitter (Retry-After honoured);
//   - reads the whole response and hands the raw bytes to the rawSink in the request's context.
type providerDoer struct {
	client     *http.Client
	extra      map[string]any
	attempts   int           // total HTTP attempts per request, >= 1
	backoff    time.Duration // first wait; doubles, capped at maxBackoff
	maxBackoff time.Duration
	perAttempt time.Duration // deadline of one attempt (0: none)
	logger     *slog.Logger
}

// httpPolicy is how the doer retries; zero fields take the defaults.
type httpPolicy struct {
	attempts            int           // HTTP attempts per request (default 5)
	backoff, maxBackoff time.Duration // first retry wait, doubling up to maxBackoff (defaults 2 s, 60 s)
	perAttempt          time.Duration // one attempt's deadline (default 10 min)
}

// newProviderDoer is a doer over client (nil: a client of its own) that merges extra into every body.
func newProviderDoer(client *http.Client, extra map[string]any, p httpPolicy, logger *slog.Logger) *providerDoer {
	d := &providerDoer{client: client, extra: extra, attempts: p.attempts, backoff: p.backoff,
		maxBackoff: p.maxBackoff, perAttempt: p.perAttempt, logger: logger}
	if d.client == nil {
		d.client = &http.Client{}
	}
	if d.attempts <= 0 {
		d.attempts = 5
	}
	if d.backoff <= 0 {
		d.backoff = 2 * time.Second
	}
	if d.maxBackoff <= 0 {
		d.maxBackoff = 60 * time.Second
	}
	if d.perAttempt <= 0 {
		d.perAttempt = 10 * time.Minute
	}
	if d.logger == nil {
		d.logger = slog.Default()
	}
	return d
}

// rawSink collects what one logical request saw on the wire, and carries the request's own extra body.
type rawSink struct {
	Extra    map[string]any // merged into the body after the doer's extra
	Body     []byte         // the last response body
	Attempts int
	Status   int
	Sampling *agent.Sampling // what the body sent asked of the sampler
}

type rawSinkKey struct{}

// samplingOf reads the sampler's fields of a chat request body; nil if it is not a JSON object. A
// field of another type (a seed written 1.5) is left out, the rest kept.
func samplingOf(body []byte) *agent.Sampling {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var sp agent.Sampling
	sp.Temperature, sp.TopP, sp.Seed = field[float64](obj, "temperature"), field[float64](obj, "top_p"), field[int64](obj, "seed")
	if n := field[int](obj, "max_tokens"); n != nil {
		sp.MaxTokens = *n
	} else if n := field[int](obj, "max_completion_tokens"); n != nil {
		sp.MaxTokens = *n
	}
	return &sp
}

// field is obj[k] as a T; nil if absent, null or of another type.
func field[T any](obj map[string]json.RawMessage, k string) *T {
	var v *T
	if raw, ok := obj[k]; !ok || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

func withRawSink(ctx context.Context, s *rawSink) context.Context {
	return context.WithValue(ctx, rawSinkKey{}, s)
}

func sinkExtra(s *rawSink) map[string]any {
	if s == nil {
		return nil
	}
	return s.Extra
}

// retryableStatus says whether an HTTP status is worth another attempt.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

func (d *providerDoer) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	sink, _ := ctx.Value(rawSinkKey{}).(*rawSink)
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		body = b
	}
	for _, extra := range []map[string]any{d.extra, sinkExtra(sink)} {
		if len(extra) > 0 && len(body) > 0 {
			merged, err := mergeJSONObject(body, extra)
			if err != nil {
				return nil, err
			}
			body = merged
		}
	}
	if sink != nil {
		sink.Sampling = samplingOf(body)
	}
	attempts := max(d.attempts, 1)
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if sink != nil {
			sink.Attempts = attempt
		}
		resp, raw, err := d.once(ctx, req, body)
		if err == nil && !retryableStatus(resp.StatusCode) {
			if sink != nil {
				sink.Body, sink.Status = raw, resp.StatusCode
			}
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			resp.ContentLength = int64(len(raw))
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := d.wait(attempt)
		if err != nil {
			lastErr = err
		} else {
			lastErr = fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncateBytes(raw, 300))
			if ra := retryAfter(resp.Header.Get("Retry-After")); ra > 0 {
				wait = min(ra, d.maxBackoff)
			}
			if attempt == attempts {
				// Hand the last error response to go-openai so it builds its usual *APIError.
				if sink != nil {
					sink.Body, sink.Status = raw, resp.StatusCode
				}
				resp.Body = io.NopCloser(bytes.NewReader(raw))
				resp.ContentLength = int64(len(raw))
				return resp, nil
			}
		}
		if attempt == attempts {
			break
		}
		d.logger.Warn("provider request failed; retrying", "attempt", attempt, "of", attempts, "wait", wait, "err", lastErr)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("%w after %d attempts: %w", ErrProviderUnreachable, attempts, lastErr)
}

// ErrProviderUnreachable wraps the last transport error once every HTTP attempt failed.
var ErrProviderUnreachable = errors.New("provider request failed")

// once sends one attempt and reads the whole body under the attempt deadline.
func (d *providerDoer) once(ctx context.Context, orig *http.Request, body []byte) (*http.Response, []byte, error) {
	actx := ctx
	if d.perAttempt > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, d.perAttempt)
		defer cancel()
	}
	req := orig.Clone(actx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read response: %w", err)
	}
	return resp, raw, nil
}

func (d *providerDoer) wait(attempt int) time.Duration {
	w := d.backoff << (attempt - 1)
	if w > d.maxBackoff || w <= 0 {
		w = d.maxBackoff
	}
	// ±20% jitter so parallel episodes do not retry in lockstep.
	return time.Duration(float64(w) * (0.8 + 0.4*rand.Float64()))
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// mergeJSONObject sets every key of extra on the top-level JSON object in body.
func mergeJSONObject(body []byte, extra map[string]any) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("extra body: request is not a JSON object: %w", err)
	}
	for k, v := range extra {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("extra body field %q: %w", k, err)
		}
		obj[k] = b
	}
	return json.Marshal(obj)
}

func truncateBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
