// msgx console: TypeScript for the browser, bundled by esbuild into /console/app.js (see
// lib/http/console/build.ts), no framework. Reads the admin API of the same origin; every write
// carries `x-msgx-actor: console` so audit_log names the console.
import { ApiError } from './api.ts';
import { deadPage } from './dead.ts';
import type { DeadKind } from './model.ts';
import { startRouter } from './nav.ts';
import { overviewPage } from './overview.ts';
import { view } from './shell.ts';
import { traceForm, traceIndexPage } from './trace.ts';
import { procTracePage } from './traceProc.ts';
import { txTracePage } from './traceTx.ts';
import { card, errorBox } from './ui.ts';

const DEAD_KINDS: readonly string[] = ['proc', 'event', 'txmsg'] satisfies DeadKind[];

/** #/overview (default), #/dead/{kind}?…, #/trace, #/trace/proc/{msgId}, #/trace/tx/{id}. */
async function route(): Promise<void> {
  const [path = '', qs] = (location.hash.replace(/^#/, '') || '/overview').split('?');
  const query = new URLSearchParams(qs ?? '');
  const [page, kind, id] = path.split('/').filter(Boolean);
  try {
    if (page === 'dead') await deadPage(kind && DEAD_KINDS.includes(kind) ? (kind as DeadKind) : 'proc', query);
    else if (page === 'trace' && kind === 'proc' && id) await procTracePage(decodeURIComponent(id));
    else if (page === 'trace' && kind === 'tx' && id) await txTracePage(decodeURIComponent(id));
    else if (page === 'trace') await traceIndexPage();
    else await overviewPage();
  } catch (err) {
    view.replaceChildren(errorBox(err));
    if (page === 'trace') view.prepend(card(null, traceForm(kind, id ? decodeURIComponent(id) : '')));
    if (!(err instanceof ApiError)) console.error(err);
  }
  document.body.dataset.ready = path;
}

startRouter(route);
