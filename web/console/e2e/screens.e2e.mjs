// The console at its extremes (run by TestConsoleScreens): an empty fleet, and 3,000
// machines, where a filter keystroke is timed to the next paint (a figure, not a
// pass/fail). Then a member held with Incus's own API reaches the fleet page on the fleet
// stream without a reload (the server's refresh interval is an hour: only Incus's event
// can bring it).
import { axe, clean, expect, keystrokeToPaint, launch, log, newPage, shot, signIn } from './lib.mjs';

const { EMPTY_BASE, EMPTY_TOKEN, MANY_BASE, MANY_TOKEN, SHOTS, CONTROL, MEMBER } = process.env;
const browser = await launch();
try {
  log('step: empty fleet');
  const e = await newPage(browser, EMPTY_BASE);
  await signIn(e.page, EMPTY_TOKEN);
  await e.page.getByText('No machines yet').waitFor();
  await e.page.getByText('Incus is not configured', { exact: true }).waitFor();
  await shot(e.page, SHOTS, 'empty-fleet');
  await axe(e.page, 'empty fleet');
  await e.page.goto('/machines/nowhere');
  await e.page.getByText('No such machine').waitFor();
  await shot(e.page, SHOTS, 'no-such-machine');
  await e.page.goto('/fencing');
  await e.page.getByRole('heading', { name: 'Fence progress' }).waitFor();
  await shot(e.page, SHOTS, 'fencing-without-incus');
  await axe(e.page, 'fencing without incus');
  await e.page.goto('/hardware');
  await e.page.getByText('No hardware profile yet').waitFor();
  await shot(e.page, SHOTS, 'hardware-empty');
  await axe(e.page, 'hardware without profiles');
  await e.page.goto('/identities');
  await e.page.locator('tr[data-identity="admin"]').waitFor();
  await shot(e.page, SHOTS, 'identities-one');
  await axe(e.page, 'identities');
  await clean(e.page, 'empty');

  log('step: 3,000 machines');
  const m = await newPage(browser, MANY_BASE);
  await signIn(m.page, MANY_TOKEN);
  await m.page.waitForFunction(() => Number(document.querySelector('[data-fleet-count]')?.getAttribute('data-fleet-count')) >= 3000, null, { timeout: 60000 });
  await shot(m.page, SHOTS, 'many-machines', false);
  const search = m.page.locator('[data-fleet-search]');
  await search.focus();
  // Each keystroke: from the keydown event to the first frame after the table shows the
  // filtered rows (the count element changes with them).
  const times = [];
  await search.fill('node-');
  await m.page.locator('[data-fleet-count="3000"]').waitFor();
  // Typing 1, 2, 3 narrows to 1000, 100, 10 rows; three Backspaces widen back to 3000.
  for (const key of ['1', '2', '3', 'Backspace', 'Backspace', 'Backspace']) {
    await m.page.waitForTimeout(50);
    const took = await keystrokeToPaint(m.page, key);
    expect(took >= 0, `the fleet count did not change within 10 s of pressing ${key}`);
    times.push(took);
  }
  const shown = Number(await m.page.locator('[data-fleet-count]').getAttribute('data-fleet-count'));
  expect(shown === 3000, `after the Backspaces all 3000 rows should show again, not ${shown}`);
  times.sort((a, b) => a - b);
  log(`figure: fleet filter keystroke to paint at 3000 rows in Chromium: median ${times[Math.floor(times.length / 2)].toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms (${times.length} keystrokes)`);
  await shot(m.page, SHOTS, 'many-machines-after', false);

  log('step: a change arrives live, without reload');
  await search.fill('');
  const row = m.page.locator(`tr[data-machine="${MEMBER}"]`);
  await row.waitFor();
  expect((await row.locator('.tag', { hasText: 'held' }).count()) === 0, `${MEMBER} shows held before it was held`);
  await m.page.locator('[data-fleet-live="yes"]').waitFor();
  await m.page.evaluate(() => {
    window.__sameDocument = true;
  });
  const r = await fetch(CONTROL + '/hold-member', { method: 'POST' });
  expect(r.ok, `control /hold-member: ${r.status} ${await r.text()}`);
  const t0 = Date.now();
  await row.locator('.tag', { hasText: 'held' }).waitFor({ timeout: 30000 });
  log(`figure: a member held with incus reached the fleet page in ${Date.now() - t0} ms (no reload; refresh interval 1h)`);
  expect(await m.page.evaluate(() => window.__sameDocument === true), 'the page reloaded to show the change');
  expect((await m.page.locator('[data-fleet-stream="disconnected"]').count()) === 0, 'the stream shows as disconnected while it delivers');
  await shot(m.page, SHOTS, 'fleet-live-update', false);
  await clean(m.page, 'many');

  log('step: the fleet page says when its stream is down, and recovers');
  const l = await newPage(browser, MANY_BASE);
  // The console's sockets go through this route, so the test can cut them and refuse
  // reconnections for a while, as a lost network would.
  let cut = false;
  const sockets = [];
  await l.page.routeWebSocket(/\/graphql$/, (ws) => {
    if (cut) {
      ws.close({ code: 4499, reason: 'cut by the test' });
      return;
    }
    sockets.push({ ws, server: ws.connectToServer() });
  });
  await signIn(l.page, MANY_TOKEN);
  await l.page.locator('[data-fleet-live="yes"]').waitFor({ timeout: 60000 });
  cut = true;
  // 4499 (terminated) is what graphql-ws sees when a socket dies; it reconnects.
  for (const { ws, server } of sockets.splice(0)) {
    await server.close();
    await ws.close({ code: 4499, reason: 'cut by the test' });
  }
  await l.page.locator('[data-fleet-stream="disconnected"]').waitFor({ timeout: 20000 });
  expect((await l.page.locator('[data-fleet-live="no"]').count()) === 1, 'the count does not say the rows are live');
  expect(Number(await l.page.locator('[data-fleet-count]').getAttribute('data-fleet-count')) >= 3000, 'the rows stay while the stream is down');
  await shot(l.page, SHOTS, 'fleet-stream-disconnected', false);
  cut = false;
  await l.page.locator('[data-fleet-live="yes"]').waitFor({ timeout: 30000 });
  expect((await l.page.locator('[data-fleet-stream="disconnected"]').count()) === 0, 'the banner stays after the stream is back');
} finally {
  await browser.close();
}
