// The console's light and dark themes. An administrator's choice (the switch in the top
// bar) is kept in localStorage (a preference, not a credential); without one the console
// follows the browser's prefers-color-scheme, and changes with it.
import { useCallback, useState } from 'react';

export type ThemeChoice = 'system' | 'light' | 'dark';
export const themeChoices: ThemeChoice[] = ['system', 'light', 'dark'];
const key = 'apelora.theme';

export function parseTheme(stored: string | null | undefined): ThemeChoice {
  return stored === 'light' || stored === 'dark' ? stored : 'system';
}

// resolveTheme is the theme shown for a choice given what the browser prefers.
export function resolveTheme(choice: ThemeChoice, prefersDark: boolean): 'light' | 'dark' {
  if (choice === 'system') return prefersDark ? 'dark' : 'light';
  return choice;
}

function stored(): ThemeChoice {
  try {
    return parseTheme(localStorage.getItem(key));
  } catch {
    return 'system';
  }
}

const media = () => window.matchMedia('(prefers-color-scheme: dark)');

// applyTheme sets <html data-theme>, which styles.css keys the dark colours on.
export function applyTheme(choice: ThemeChoice = stored()) {
  document.documentElement.dataset.theme = resolveTheme(choice, media().matches);
}

// startTheme applies the stored choice before the first paint, and follows the browser's
// preference whenever the choice is "as the system" (on every page, sign-in included).
export function startTheme() {
  applyTheme();
  media().addEventListener('change', () => applyTheme());
}

// useTheme is the switch's state: the choice, and a setter that stores and applies it.
export function useTheme(): [ThemeChoice, (c: ThemeChoice) => void] {
  const [choice, setChoice] = useState<ThemeChoice>(stored);
  const set = useCallback((c: ThemeChoice) => {
    try {
      if (c === 'system') localStorage.removeItem(key);
      else localStorage.setItem(key, c);
    } catch {
      // Storage refused (private mode): the choice lasts until the page is left.
    }
    applyTheme(c);
    setChoice(c);
  }, []);
  return [choice, set];
}
