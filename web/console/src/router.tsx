// A small router over the History API: one page per path, filters in the query string.
// Links are real <a href> elements, so they open in new tabs and work with the keyboard.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode, type MouseEvent, type AnchorHTMLAttributes } from 'react';

interface Location {
  path: string;
  search: string;
}

interface RouterValue extends Location {
  navigate(to: string, opts?: { replace?: boolean }): void;
}

const RouterContext = createContext<RouterValue | null>(null);

function current(): Location {
  return { path: window.location.pathname, search: window.location.search };
}

export function Router({ children }: { children: ReactNode }) {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const onPop = () => setLoc(current());
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, []);
  const navigate = useCallback((to: string, opts?: { replace?: boolean }) => {
    if (opts?.replace) window.history.replaceState(null, '', to);
    else window.history.pushState(null, '', to);
    setLoc(current());
  }, []);
  const value = useMemo(() => ({ ...loc, navigate }), [loc, navigate]);
  return <RouterContext.Provider value={value}>{children}</RouterContext.Provider>;
}

export function useRouter(): RouterValue {
  const r = useContext(RouterContext);
  if (!r) throw new Error('useRouter outside <Router>');
  return r;
}

// useSearch returns the query string's parameters and a setter that replaces them (filters
// change the URL without adding a history entry per keystroke).
export function useSearch(): [URLSearchParams, (next: URLSearchParams) => void] {
  const { path, search, navigate } = useRouter();
  const params = useMemo(() => new URLSearchParams(search), [search]);
  const set = useCallback(
    (next: URLSearchParams) => {
      const s = next.toString();
      navigate(path + (s ? '?' + s : ''), { replace: true });
    },
    [navigate, path],
  );
  return [params, set];
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { to: string };

export function Link({ to, onClick, children, ...rest }: LinkProps) {
  const { navigate, path } = useRouter();
  const handle = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  const active = path === to || (to !== '/' && path.startsWith(to + '/'));
  return (
    <a href={to} onClick={handle} aria-current={active ? 'page' : undefined} {...rest}>
      {children}
    </a>
  );
}

export function machinePath(name: string): string {
  return '/machines/' + encodeURIComponent(name);
}
