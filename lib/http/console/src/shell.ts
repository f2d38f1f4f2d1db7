/** The page around every view (index.html): the view itself, the nav links, the pipeline pill. */
import { byId } from './dom.ts';
import { fmtTime } from './format.ts';

export const view = byId<HTMLElement>('view');

export function setNav(name: string): void {
  for (const a of document.querySelectorAll<HTMLElement>('[data-nav]')) a.classList.toggle('active', a.dataset.nav === name);
}

export function updatePill(paused: boolean): void {
  const pill = byId('pipeline-pill');
  pill.className = `pill ${paused ? 'paused' : 'running'}`;
  pill.textContent = paused ? 'Pipeline paused' : 'Pipeline running';
  byId('updated').textContent = `updated ${fmtTime(new Date().toISOString())}`;
}
