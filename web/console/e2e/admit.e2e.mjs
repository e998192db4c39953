// The founding member admitted from the console (run by TestConsoleAdmitsTheFoundingMember):
// run.sh's cluster, one member with no machine record and the placement guard on. Admit is
// offered where the operator stands (the Enrolment page, the member's page); its dialog
// registers the member first and says so, then admits it; then Incus places an instance.
import { axe, clean, confirmPlanned, dialog, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, CONTROL, MEMBER } = process.env;
const launchInstance = async () => {
  const r = await fetch(CONTROL + '/launch', { method: 'POST' });
  expect(r.ok, `control /launch: ${r.status}`);
  return r.json();
};
const step = (s) => log('step:', s);

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);

  step('with no member admitted, Incus refuses an instance with the guard\'s advice');
  const refused = await launchInstance();
  expect(refused.error && refused.error.includes('Admit a member first') && refused.error.includes('apeloractl admit'), 'refused with the advice: ' + JSON.stringify(refused));

  step('the Enrolment page lists the member as joined, not admitted, and offers Admit');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Enrolment' }).click();
  const row = page.locator(`[data-section="HELD"] tr[data-machine="${MEMBER}"][data-phase="UNREGISTERED"]`);
  await row.waitFor();
  const admitHere = row.locator('[data-action="admit"]');
  expect((await admitHere.getAttribute('aria-disabled')) === null, 'Admit is offered on the Enrolment page');
  await shot(page, SHOTS, '01-enrolment-admit-offered');
  await axe(page, 'enrolment with the founding member');

  step('its page offers Admit too, once its checks (run on opening) say admissible');
  await page.goto(`/machines/${MEMBER}?tab=admission`);
  await page.locator('.title-row [data-phase="UNREGISTERED"]').waitFor();
  await page.locator('[data-verdict="ADMISSIBLE"]').waitFor({ timeout: 30000 });
  const admit = page.locator('.actions [data-action="admit"]');
  expect((await admit.getAttribute('aria-disabled')) === null, 'Admit is enabled on the member\'s page once admissible');
  await shot(page, SHOTS, '02-member-admissible');
  await axe(page, 'founding member admissible');

  step('Admit: the dialog says a record is needed, and registers it first (step 1 of 2)');
  await admit.click();
  await dialog(page).locator('[data-two-steps]').waitFor();
  const first = await dialog(page).innerText();
  expect(first.includes('step 1 of 2') && first.includes('no machine record') && first.includes('Register') && first.includes('Admit'), 'the dialog says both steps: ' + first);
  expect((await dialog(page).locator('[data-plan]').innerText()).includes('What it will do'), 'the registration is planned');
  await dialog(page).locator('[data-confirm][data-planned]').waitFor();
  await shot(page, SHOTS, '03-register-and-admit-step-1');
  await axe(page, 'register and admit, step 1');
  await confirmPlanned(page);

  step('step 2 of 2: the admission\'s plan, confirmed after reading it');
  await dialog(page).locator('[data-registered-now]').waitFor({ timeout: 20000 });
  expect((await dialog(page).innerText()).includes('step 2 of 2'), 'the second step says so');
  await dialog(page).locator('[data-plan-call]').first().waitFor({ timeout: 30000 });
  const plan = await dialog(page).locator('[data-plan]').innerText();
  expect(plan.includes(`PUT /1.0/cluster/members/${MEMBER}`) && plan.includes('user.apelora.admission'), 'the admission plan marks the member: ' + plan);
  expect((await dialog(page).innerText()).includes('step 2 of 2'), 'the second step still says so once the page has read the machine again');
  await shot(page, SHOTS, '04-register-and-admit-step-2');
  await axe(page, 'register and admit, step 2');
  await confirmPlanned(page);
  await dialog(page).waitFor({ state: 'detached', timeout: 30000 });
  await page.locator('.title-row [data-phase="ADMITTED"]').waitFor({ timeout: 30000 });
  await shot(page, SHOTS, '05-member-admitted');

  step('Incus places an untargeted instance on the admitted member');
  const placed = await launchInstance();
  expect(!placed.error && placed.location === MEMBER, 'the instance landed on the member: ' + JSON.stringify(placed));

  step('the history keeps both steps');
  await page.goto(`/machines/${MEMBER}?tab=history`);
  for (const a of ['registerMachine', 'admitMember']) {
    await page.locator(`[data-tab-panel="history"] tr[data-audit-action="${a}"][data-outcome="SUCCEEDED"]`).waitFor({ timeout: 20000 });
  }
  await shot(page, SHOTS, '06-member-history');
  await clean(page, 'founding member admitted');
  log('founding member admitted: all steps passed');
} finally {
  await browser.close();
}
