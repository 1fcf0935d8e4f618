// Resumes a Jupyter kernel WebSocket from a page in Debian's headless Chromium, as JupyterLab's
// kernel connection does: for gateway/reconnect_browser_test.go. The page (on the gateway's origin)
// executes a cell printing N lines, reads for a while, closes the socket cleanly ("clean"; "busy": the
// page's thread blocked for 200 ms first while frames keep arriving, which the browser's network layer
// has answered the gateway's pings for but the page never reads: a socket closing drops them), reconnects
// with the same session_id and reads until the cell's idle status.
//
// Environment: BASE (the gateway's http URL), KERNEL (its id), TOKEN, LINES, READ_MS, MODE (clean|busy),
// CHROMIUM (default /usr/bin/chromium). Prints one JSON line: the stream text (deduplicated by message
// id, in order), the frames that came twice, and the frames before and after the leave.
import { chromium } from "playwright-core";

const env = process.env;
const browser = await chromium.launch({
  executablePath: env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  await page.goto(`${env.BASE}/api?token=${env.TOKEN}`);
  const out = await page.evaluate(async ({ base, kernel, token, lines, readMs, mode }) => {
    const session = crypto.randomUUID();
    const url = `${base.replace(/^http/, "ws")}/api/kernels/${kernel}/channels?session_id=${session}&token=${token}`;
    const msgId = crypto.randomUUID();
    const code = `import sys, time\nfor i in range(${lines}):\n    print(i)\n    if i % 10 == 9:\n        sys.stdout.flush()\n        time.sleep(0.005)\n`;
    const req = JSON.stringify({
      channel: "shell", buffers: [], parent_header: {}, metadata: {},
      header: { msg_id: msgId, msg_type: "execute_request", session, username: "t", date: new Date().toISOString(), version: "5.3" },
      content: { code, silent: false, store_history: true, user_expressions: {}, allow_stdin: false, stop_on_error: true },
    });
    const seen = new Set();
    const text = [];
    const counts = [0, 0];
    let repeats = 0, phase = 0, done = false;
    const take = (raw) => {
      const m = JSON.parse(raw);
      if (m.parent_header?.msg_id !== msgId) return;
      counts[phase]++;
      if (seen.has(m.header.msg_id)) { repeats++; return; }
      seen.add(m.header.msg_id);
      if (m.msg_type === "stream") text.push(m.content.text);
      if (m.msg_type === "status" && m.content.execution_state === "idle") done = true;
    };
    const open = () => new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.onmessage = (e) => take(e.data);
      ws.onopen = () => resolve(ws);
      ws.onerror = () => reject(new Error("websocket error"));
    });
    const closed = (ws) => new Promise((resolve) => { ws.onclose = resolve; });
    let ws = await open();
    ws.send(req);
    await new Promise((r) => setTimeout(r, readMs));
    if (mode === "busy") { // the page's thread is blocked while frames keep arriving, then it leaves
      const until = performance.now() + 200;
      while (performance.now() < until) { /* busy */ }
    }
    const c = closed(ws);
    ws.close();
    await c;
    if (!done) {
      phase = 1;
      ws = await open();
      const deadline = Date.now() + 60000;
      while (!done && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      ws.close();
    }
    return { text: text.join(""), repeats, frames_before: counts[0], frames_after: counts[1] };
  }, { base: env.BASE, kernel: env.KERNEL, token: env.TOKEN, lines: Number(env.LINES ?? 3000), readMs: Number(env.READ_MS ?? 500), mode: env.MODE ?? "clean" });
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
