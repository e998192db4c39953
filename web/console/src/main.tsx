import { createRoot } from 'react-dom/client';
import { App } from './App';
import { readConfig } from './config';
import { startTheme } from './lib/theme';
import './styles.css';

// The theme before the first paint, so a dark page does not flash light.
startTheme();
const root = document.getElementById('console');
if (root) {
  createRoot(root).render(<App config={readConfig(root)} />);
}
