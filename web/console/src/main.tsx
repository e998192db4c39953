import { createRoot } from 'react-dom/client';
import { App } from './App';
import { readConfig } from './config';
import './styles.css';

const root = document.getElementById('console');
if (root) {
  createRoot(root).render(<App config={readConfig(root)} />);
}
