/* text_decode.h - read a user's text document as UTF-8, whatever Unicode encoding it was
 * saved in, or refuse it with the byte offset at fault; never cut it silently.
 *
 * The encoding is detected from the byte-order mark: UTF-8 (BOM removed), UTF-16 LE or BE
 * (converted to UTF-8); without a BOM the bytes must be valid UTF-8. A NUL byte (a binary
 * file, or UTF-16 saved without a BOM), an invalid or overlong UTF-8 sequence, a surrogate
 * code point, an unpaired UTF-16 surrogate, an odd-length UTF-16 file and a UTF-32 BOM are
 * refused, naming the file and the byte offset in the file. */
#ifndef SDN_TEXT_DECODE_H
#define SDN_TEXT_DECODE_H

#include <stddef.h>

#include "common/sdn_err.h"

/* Encodings sdn_text_decode recognizes. */
typedef enum sdn_text_enc { SDN_TEXT_UTF8 = 0, SDN_TEXT_UTF8_BOM, SDN_TEXT_UTF16LE, SDN_TEXT_UTF16BE } sdn_text_enc;

/* Name of an encoding ("UTF-8", "UTF-8 with BOM", "UTF-16LE", "UTF-16BE"). */
const char *sdn_text_enc_name(sdn_text_enc e);

/* Decode the `len` bytes of `data` (the contents of file `name`, used in messages) into a
 * malloc'd NUL-terminated UTF-8 string *out of *out_len bytes (no NUL inside), and the
 * encoding found in *enc (may be NULL). Errors: SDN_EFORMAT "<name>: <what> at byte offset N",
 * SDN_ENOMEM. */
int sdn_text_decode(const char *name, const unsigned char *data, size_t len, char **out, size_t *out_len, sdn_text_enc *enc,
                    sdn_err *err);

/* Read the file at `path` (refused when longer than max_bytes before decoding; the message
 * ends with `why`) and decode it as sdn_text_decode does. */
int sdn_text_read_file(const char *path, size_t max_bytes, const char *why, char **out, size_t *out_len, sdn_text_enc *enc,
                       sdn_err *err);

#endif
