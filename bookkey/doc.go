// Package bookkey computes the BookKey of a plain-text book: the content
// fingerprint by which two devices recognise the same book whatever line
// endings, leading byte-order mark, surrounding blank space or text encoding
// the file arrived with.
//
// It reads only the reader it is given, in one pass, with memory that does not
// grow with the size of the book.
//
// # The key
//
// The rules are those of the original design (seed 003), which the reader's
// other implementations follow too: a key computed here must equal theirs.
//
//  1. Decode. The input is decoded to UTF-8 (see Encodings). UTF-8 input is
//     used as it is, ill-formed or not.
//  2. Byte-order mark. If the text starts with U+FEFF (bytes EF BB BF), those
//     three bytes are removed, once. A U+FEFF anywhere else is text, even
//     right after leading blanks: " \uFEFFabc" keys as "\uFEFFabc".
//  3. Line ends. CR LF becomes LF, and every other CR becomes LF, a CR at the
//     very end included.
//  4. Trim. Space (U+0020), tab (U+0009) and LF are removed from both ends.
//     Nothing else is: not U+3000 IDEOGRAPHIC SPACE, not NO-BREAK SPACE, not
//     form feed, vertical tab or NUL. Blank lines inside the text stay.
//  5. Hash. The remaining bytes are hashed with MD5 (the default) or SHA-256.
//     The key is "md5:" or "sha256:" followed by the digest in lowercase hex.
//
// Rules 2 to 4 work on bytes. They are safe on any text because the bytes they
// look at are ASCII, and no byte of a multi-byte UTF-8 character is.
//
// Golden values: "\uFEFF abc \r\n\r\n" keys as md5:900150983cd24fb0d6963f7d28e17f72
// (md5 of "abc"), " \r\n\t " as md5:d41d8cd98f00b204e9800998ecf8427e (md5 of
// the empty string).
//
// # Lengths
//
// Result.UTF16Len is the length of the normalized text in UTF-16 code units,
// the coordinate system of character offsets into a book: one unit per
// character, two above U+FFFF. Ill-formed UTF-8, which only a forced utf-8 or
// a UTF-8 byte-order mark lets through, counts one unit (a U+FFFD) per
// maximal subpart of an ill-formed sequence, as the Unicode Standard (section
// 3.9), the WHATWG Encoding Standard and .NET's decoder replace it: "a\xE6\xADb"
// is 3 units. An incomplete sequence at the very end of the normalized text
// counts nothing, as the seed's decoder holds it and is never flushed:
// "正\xE6\xAD" is 1 unit, and so is "正\xE6\xAD \r\n", whose end is trimmed.
//
// Result.Bytes is the length of the normalized text in bytes: what was hashed.
//
// # Encodings
//
// Options.Encoding forces an encoding or, by default (Auto), asks for
// detection:
//
//   - a UTF-8 byte-order mark means UTF-8;
//   - FF FE means UTF-16LE, FE FF UTF-16BE;
//   - otherwise the input is UTF-8 if its normalized text is well-formed
//     UTF-8, but for an incomplete character at the very end;
//   - otherwise it is GB18030, which covers GBK and GB2312.
//
// UTF-16 without a byte-order mark is not detected (it is valid UTF-8 with NUL
// bytes); force UTF16 for it. The last step is decided at the first
// ill-formed sequence: Read then seeks the reader back to where it was and
// reads it again as GB18030. Detection so costs no memory, only a second read
// of a file that is not UTF-8. A reader that cannot seek gets ErrNotSeekable;
// its caller must force the encoding. Result.Encoding says which encoding was
// used.
//
// Other encodings are decoded with golang.org/x/text, which replaces
// ill-formed input by U+FFFD. A UTF-16 or GB18030 byte-order mark decodes to
// U+FEFF and rule 2 removes it, so the same text has the same key in every
// encoding.
//
// # Resources
//
// A call uses fixed buffers (about 600 KiB, reused from call to call) and
// allocates nothing (the Key is a value; its text form is made on demand),
// however long the text and however long a run of blank space in it: a blank run that may turn out to be trailing is
// hashed as it comes, after saving the hash state at its start, which is put
// back if the text ends inside the run.
//
// A text longer than one buffer is hashed on a second goroutine while the
// caller's goroutine reads and normalizes the next buffer: MD5 cannot be
// split, so keying is as fast as one core hashing, no faster. That goroutine
// is joined before Read returns, whatever it returns. ctx is checked between
// reads. Read may be called from several goroutines at once.
package bookkey
