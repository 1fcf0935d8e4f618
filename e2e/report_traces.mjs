// Opens pages a suite's report wrote (the report, rendered traces) in Debian's headless Chromium with
// the network cut off, for report/traces_test.go: whether any agent script ran (payloads append their
// name to window.__pwned), what the page asked for off file://, its CSP meta, the inert content kept
// (text, data: images) and the console's messages. The Go test judges.
//
// Environment: PAGES (paths, one per line), CHROMIUM (default /usr/bin/chromium). Prints one JSON line.
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const pages = (process.env.PAGES ?? "").split("\n").filter((p) => p);
if (pages.length === 0) {
  console.error("report_traces.mjs: set PAGES");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const seen = [];
try {
  for (const path of pages) {
    const context = await browser.newContext({ offline: true });
    const s = { path, blocked: [], errors: [], console: [] };
    await context.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith("file://")) return route.continue();
      s.blocked.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    page.on("pageerror", (e) => s.errors.push(e.message));
    page.on("console", (m) => s.console.push(m.text()));
    await page.goto(pathToFileURL(path).href, { waitUntil: "load", timeout: 30000 });
    await page.waitForTimeout(500); // a payload's late handler (onerror, onload) has run by now
    s.pwned = await page.evaluate(() => window.__pwned ?? []);
    s.csp = await page.evaluate(() => document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? "");
    s.text = await page.locator("body").innerText();
    s.dataImages = await page.locator('img[src^="data:image/png"]').count();
    seen.push(s);
    await context.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
