// Opens a suite's HTML report (pyrualean report) in Debian's headless Chromium with the network cut
// off: the page must load with no request leaving file://, its plots must render (inline SVG with
// drawn bars), and every trace link must open a rendered trace. (The trace pages ask the network
// for nothing: render_traces.py drops their scripts and adds a CSP.)
//
// Environment: REPORT (path of the report), CHROMIUM (default /usr/bin/chromium). Prints one JSON
// line with what it saw; exit 0 when every check passed.
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const report = process.env.REPORT;
if (!report) {
  console.error("report.mjs: set REPORT");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const seen = { blocked: [], plots: 0, drawnPlots: 0, links: 0, tracesOpened: 0, errors: [] };
try {
  const context = await browser.newContext({ offline: true });
  // Only file:// may load; anything else is recorded and refused.
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file://")) return route.continue();
    if (!seen.blocked.includes(url)) seen.blocked.push(url);
    return route.abort();
  });
  const page = await context.newPage();
  page.on("pageerror", (e) => seen.errors.push(e.message));
  const resp = await page.goto(pathToFileURL(report).href, { waitUntil: "load", timeout: 30000 });
  if (!resp || !resp.ok()) seen.errors.push(`report did not load: ${resp && resp.status()}`);
  const reportBlocked = seen.blocked.length;
  seen.title = await page.title();
  const plots = page.locator("figure.plot svg");
  seen.plots = await plots.count();
  for (let i = 0; i < seen.plots; i++) {
    const svg = plots.nth(i);
    const box = await svg.boundingBox();
    // gonum draws bars as filled paths: a plot is drawn when it has a visible box and filled shapes.
    const filled = await svg.evaluate((el) => [...el.querySelectorAll("path")].filter((p) => {
      const f = p.getAttribute("fill") || p.style.fill;
      const b = p.getBBox();
      return f && f !== "none" && b.width > 0 && b.height > 0;
    }).length);
    if (box && box.width > 100 && box.height > 100 && filled > 0) seen.drawnPlots++;
  }
  const hrefs = await page.locator("a.trace").evaluateAll((as) => as.map((a) => a.href));
  seen.links = hrefs.length;
  for (const href of hrefs) {
    const tp = await context.newPage();
    const r = await tp.goto(href, { waitUntil: "domcontentloaded", timeout: 30000 }).catch((e) => {
      seen.errors.push(`${href}: ${e.message}`);
      return null;
    });
    // nbconvert's page holds the notebook's cells; the setup cell makes the robot. (A file:// load
    // may have no response object; a missing file shows Chromium's error page, which has no cells.)
    const cells = r === null || r.ok() ? await tp.locator(".jp-Cell, .cell").count() : 0;
    if (cells > 0 && (await tp.locator("body").innerText()).includes("make(")) {
      seen.tracesOpened++;
    } else {
      seen.errors.push(`${href}: not a rendered trace`);
    }
    await tp.close();
  }
  seen.reportBlocked = reportBlocked;
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
const ok = seen.errors.length === 0 && seen.blocked.length === 0 && seen.plots > 0 && seen.drawnPlots === seen.plots &&
  seen.links > 0 && seen.tracesOpened === seen.links;
process.exit(ok ? 0 : 1);
