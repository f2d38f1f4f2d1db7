'use strict';
// Lambda bundles only (infra-cdk/bundle.ts): mysql2 needs iconv-lite for result sets in a charset
// Node's Buffer does not speak. msgx connects with utf8mb4, so results arrive as UTF-8; other
// charsets are decoded with the runtime's TextDecoder (full ICU: gbk, gb18030, big5, euc-jp,
// shift_jis, euc-kr, windows-125x, koi8-r...). Encoding to such a charset is never needed.
// cesu8 is mysql2's name for utf8mb3, the charset of MySQL's and MariaDB's result metadata
// (column and parameter names): identical to UTF-8 for the Basic Multilingual Plane, the only
// characters utf8mb3 can hold.
const LABELS = {
  cesu8: 'utf-8',
  eucjp: 'euc-jp',
  sjis: 'shift_jis',
  euckr: 'euc-kr',
  latin2: 'iso-8859-2',
  koi8r: 'koi8-r',
  cp1250: 'windows-1250',
  cp1251: 'windows-1251',
  cp1256: 'windows-1256',
  cp1257: 'windows-1257',
  cp866: 'ibm866',
  macroman: 'macintosh',
};
function label(encoding) {
  const e = String(encoding).toLowerCase();
  return LABELS[e] || e;
}
exports.encodingExists = (encoding) => {
  try {
    new TextDecoder(label(encoding));
    return true;
  } catch {
    return false;
  }
};
exports.getDecoder = (encoding) => {
  let d;
  try {
    d = new TextDecoder(label(encoding));
  } catch {
    throw new Error(`msgx Lambda bundle: cannot decode charset ${encoding} (connect with utf8mb4)`);
  }
  return { write: (buf) => d.decode(buf, { stream: true }), end: () => d.decode() || undefined };
};
exports.decode = (buf, encoding) => exports.getDecoder(encoding).write(buf);
exports.getEncoder = (encoding) => {
  throw new Error(`msgx Lambda bundle: cannot encode to charset ${encoding} (connect with utf8mb4)`);
};
exports.encode = (str, encoding) => exports.getEncoder(encoding);
