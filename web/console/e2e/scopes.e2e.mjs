// A viewer who may manage one cluster only (run by TestScopedIdentities): a machine of the
// other cluster shows its actions disabled with the reason, and pressing one opens
// nothing; a machine of its own cluster has them enabled; the identities page lists its
// grant, and creating an identity (about no cluster) is disabled with why.
import { axe, clean, dialog, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, TOKEN, SHOTS } = process.env;
const reasonOf = (button) => button.locator('xpath=..').locator('.reason-tip').innerText();

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, TOKEN);

  log('step: rack2\'s machine: Approve disabled, the reason says where the viewer may manage');
  await page.goto('/machines/b-node');
  const approve = page.locator('.actions [data-action="approve"]');
  await approve.waitFor({ timeout: 30000 });
  expect((await approve.getAttribute('aria-disabled')) === 'true', 'b-node\'s Approve is not disabled');
  const why = await reasonOf(approve);
  expect(why.includes('You may manage default only; this machine is in rack2.'), 'b-node\'s reason: ' + why);
  await approve.click({ force: true });
  expect((await dialog(page).count()) === 0, 'a disabled action opened a dialog');
  await shot(page, SHOTS, '01-other-cluster');
  await axe(page, 'a machine of another cluster');

  log('step: default\'s machine: Approve enabled');
  await page.goto('/machines/a-two');
  const mine = page.locator('.actions [data-action="approve"]');
  await mine.waitFor({ timeout: 30000 });
  expect((await mine.getAttribute('aria-disabled')) === null, 'a-two\'s Approve is disabled');

  log('step: the identities page lists the grant in its cluster; creating one is disabled with why');
  await page.goto('/identities');
  const grant = page.locator('[data-grant="default"]');
  await grant.waitFor({ timeout: 30000 });
  const text = await grant.innerText();
  expect(text.includes('in default'), 'the grant reads ' + text);
  const createButton = page.locator('[data-action="create-identity"]');
  expect((await createButton.getAttribute('aria-disabled')) === 'true', 'a viewer who may manage default only may create identities');
  const createWhy = await reasonOf(createButton);
  expect(createWhy.includes('You may manage default only; this change is about no single cluster.'), 'create-identity reason: ' + createWhy);
  await shot(page, SHOTS, '02-identities');
  await clean(page, 'scoped machines');
} finally {
  await browser.close();
}
