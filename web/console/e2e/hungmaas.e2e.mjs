// Every page while MAAS hangs (run by TestConsolePagesWhileMAASHangs): MAAS's port accepts
// and nothing answers. Each page shows what Apelora and Incus know and says MAAS is not
// answering where MAAS matters; none still says "Loading" once the server has had its
// request timeout (TIMEOUT_MS, which the page is told) to answer.
import { axe, clean, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, MEMBER, TIMEOUT_MS } = process.env;
const timeout = Number(TIMEOUT_MS);
// A bound, not a measure: the server answers within its timeout (plus a loaded machine's
// slack); a page that abandons its read and asks again never shows the answer at all.
const bound = 3 * timeout + 15000;

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  // The console is told the server's request timeout.
  await page.goto('/');
  const advertised = await page.locator('#console').getAttribute('data-request-timeout');
  expect(Number(advertised) === timeout, `the page says the server's request timeout is ${advertised} ms, want ${timeout}`);
  await signIn(page, ADMIN_TOKEN);

  // settled waits until the page's content (ready) is there and nothing says Loading.
  const settled = async (where, ready) => {
    const t0 = Date.now();
    await ready.first().waitFor({ timeout: bound });
    await page.waitForFunction(() => document.querySelectorAll('.loading').length === 0, null, { timeout: bound });
    log(`${where}: shown after ${Date.now() - t0} ms (request timeout ${timeout} ms)`);
  };
  const maasBanner = () => page.locator('.banner', { hasText: 'MAAS not answering' });

  log('step: the fleet shows the member and the records at once, with the MAAS banner');
  await settled('fleet', page.locator(`tr[data-machine="${MEMBER}"]`));
  await page.locator('tr[data-machine="node-a"]').waitFor();
  await maasBanner().waitFor({ timeout: bound });
  await shot(page, SHOTS, '01-fleet');

  log('step: the machine page of a MAAS machine shows its record and the MAAS banner, as the fleet does');
  await page.goto('/machines/node-a');
  await settled('machine node-a', page.locator('.title-row [data-phase="REGISTERED"]'));
  await maasBanner().waitFor({ timeout: bound });
  const record = await page.locator('[aria-label="Apelora record"]').innerText();
  expect(record.includes('aaaa01') && record.includes('MAAS'), 'node-a shows its Apelora record: ' + record);
  expect((await page.locator('[data-action]').count()) > 0, 'node-a offers its actions');
  await shot(page, SHOTS, '02-machine-maas');
  await axe(page, 'machine with MAAS hung');
  await page.locator('[data-tab="hardware"]').click();
  const hw = await page.locator('[data-tab-panel="hardware"]').innerText();
  expect(hw.includes('MAAS not answering'), 'the hardware tab says MAAS is not answering, not that MAAS does not know the machine: ' + hw);
  await shot(page, SHOTS, '03-machine-maas-hardware');

  log('step: the member\'s page shows Incus\'s facts');
  await page.goto(`/machines/${MEMBER}`);
  await settled('machine ' + MEMBER, page.locator('.title-row [data-phase]'));
  const member = await page.locator('[aria-label="Incus member"]').innerText();
  expect(member.includes('Online') && member.includes('https://'), `${MEMBER} shows its Incus member: ${member}`);
  await shot(page, SHOTS, '04-machine-member');

  for (const [path, ready, name] of [
    ['/enrolment', page.locator('[data-section]'), 'enrolment'],
    ['/fencing', page.locator('[aria-label="Cluster"]'), 'fencing'],
    ['/rolling', page.getByRole('button', { name: 'Start a rolling reboot' }), 'rolling'],
    ['/hardware', page.locator('tr[data-profile="lab"]'), 'hardware'],
    ['/identities', page.locator('tr[data-identity="admin"]'), 'identities'],
    ['/audit', page.locator('tr[data-audit-action]'), 'audit'],
  ]) {
    log(`step: ${name}`);
    await page.goto(path);
    await settled(name, ready);
    await shot(page, SHOTS, `05-${name}`);
  }
  await page.goto('/enrolment');
  await settled('enrolment', page.locator('[data-section]'));
  await maasBanner().waitFor({ timeout: bound });
  await clean(page, 'pages with MAAS hung');
  log('pages with MAAS hung: all steps passed');
} finally {
  await browser.close();
}
