import type { Item } from '../codec/message.ts';
import { type ResourceKind, SCALARS, TIME_SCALARS } from '../codec/vocabulary.ts';
import { child } from '../codec/xml.ts';
import { localTimeToDate } from '../shared/time.ts';

/**
 * How each resource kind maps onto its detail table: natural-key columns and typed columns
 * derived from the item. Names here are constants, never input, so SQL may be built from them.
 */
export interface ColumnSpec {
  column: string;
  type: 'text' | 'timestamptz';
  value: (item: Item, tz: string) => string | Date | null;
}
export interface DetailTable {
  table: string;
  /** The item's natural key within its collection (what Item.key joins). */
  keys: string[];
  columns: ColumnSpec[];
  /**
   * For collections sharing one table (ROUT and ERUT in flight_rout): the column naming the
   * collection, part of the table's joint key (flid, kind, seq), and this collection's value.
   */
  collection?: { column: string; value: string };
}

const textOf = (name: string) => (item: Item) => {
  const v = child(item.nodes, name);
  return typeof v === 'string' ? v : null;
};
const timeOf = (name: string) => (item: Item, tz: string) => toInstant(textOf(name)(item), tz);

const timed = (table: string): DetailTable => ({
  table,
  keys: ['code'],
  columns: [
    { column: 'code', type: 'text', value: textOf('CODE') },
    { column: 'beg', type: 'text', value: textOf('BEG') },
    { column: '"end"', type: 'text', value: textOf('END') },
    { column: 'beg_at', type: 'timestamptz', value: timeOf('BEG') },
    { column: 'end_at', type: 'timestamptz', value: timeOf('END') },
  ],
});

function route(kind: 'ROUT' | 'ERUT'): DetailTable {
  return {
    table: 'flight_rout',
    keys: ['seq'],
    columns: [
      { column: 'seq', type: 'text', value: textOf('SEQ') },
      { column: 'apcd', type: 'text', value: textOf('APCD') },
    ],
    collection: { column: 'kind', value: kind },
  };
}

export const DETAIL_TABLES: Record<ResourceKind, DetailTable> = {
  ROUT: route('ROUT'),
  ERUT: route('ERUT'),
  CSFL: {
    table: 'flight_csfl',
    keys: ['awcd', 'flno'],
    columns: [
      { column: 'awcd', type: 'text', value: textOf('AWCD') },
      { column: 'flno', type: 'text', value: textOf('FLNO') },
    ],
  },
  DLAY: {
    table: 'flight_dlay',
    keys: ['code'],
    columns: [
      { column: 'code', type: 'text', value: textOf('CODE') },
      { column: 'min', type: 'text', value: textOf('MIN') },
    ],
  },
  GATE: timed('flight_gate'),
  STND: timed('flight_stnd'),
  BELT: timed('flight_belt'),
  CHKC: timed('flight_chkc'),
  BRDG: timed('flight_brdg'),
  LNGE: timed('flight_lnge'),
};

/** SQL condition limiting `alias` to this collection's rows (empty when the table holds one). */
export const collectionFilter = (t: DetailTable, alias: string) =>
  t.collection ? ` AND ${alias}.${t.collection.column} = '${t.collection.value}'` : '';

/** The SQL expression of an item's natural key, as Item.key joins it ('|' between parts). */
export const keyExpr = (t: DetailTable, alias: string) => t.keys.map((k) => `${alias}.${k}`).join(` || '|' || `);

/** flight_schd scalar columns: one text column per scalar, plus `<name>_at` for times. */
export const SCALAR_COLUMNS = SCALARS.map((s) => s.toLowerCase());
export const TIME_COLUMNS = TIME_SCALARS.map((s) => `${s.toLowerCase()}_at`);

/** Wire time text → instant; '' or an unreadable value has no instant (the text is still kept). */
export function toInstant(text: string | null | undefined, tz: string): Date | null {
  if (!text) return null;
  try {
    return localTimeToDate(text, tz);
  } catch {
    return null;
  }
}
