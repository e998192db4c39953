// Who is signed in and what they may do, read once per session from the API's `viewer`.
import { createContext, useContext } from 'react';
import type { Viewer } from './lib/actions';

export const ViewerContext = createContext<Viewer | null>(null);

export function useViewer(): Viewer | null {
  return useContext(ViewerContext);
}
