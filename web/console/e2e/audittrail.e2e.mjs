// The banner every page shows while the server's check of the audit trail finds a problem
// (run by TestConsoleSaysOnEveryPageThatTheTrailDoesNotVerify): "The audit trail does not
// verify since T", T in the console's time format, with the problem and what to run.
import { axe, clean, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, SINCE, PROBLEM } = process.env;

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);
  for (const [path, name] of [['/', 'fleet'], ['/enrolment', 'enrolment'], ['/fencing', 'fencing'], ['/identities', 'identities'], ['/audit', 'audit']]) {
    log(`step: the banner on the ${name} page`);
    await page.goto(path);
    const banner = page.locator('[data-audit-trail="does-not-verify"]');
    await banner.waitFor({ timeout: 30000 });
    const text = await banner.innerText();
    const at = await banner.locator('time').getAttribute('datetime');
    const shown = new Date(SINCE).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
    expect(text.includes(`The audit trail does not verify since ${shown}`), `banner on ${name}: ${text}`);
    expect(new Date(at).getTime() === new Date(SINCE).getTime(), `banner's time ${at}, want ${SINCE}`);
    expect(text.includes(PROBLEM) && text.includes('apelora audit verify'), `banner on ${name} says: ${text}`);
    expect((await banner.getAttribute('role')) === 'alert', 'the banner is an alert');
    if (name === 'audit') {
      const line = await page.locator('.checkpoint').innerText();
      expect(line.includes('but the trail does not verify') && !line.includes('Verified up to'), `checkpoint line: ${line}`);
    }
    await shot(page, SHOTS, `banner-${name}`);
    await axe(page, `${name} with the banner`);
    await clean(page, name);
  }
} finally {
  await browser.close();
}
