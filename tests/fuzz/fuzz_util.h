/* fuzz_util.h: what every libFuzzer harness of tests/fuzz/ shares.
 *
 * refgeo's parsers take paths, not buffers, so a harness writes the fuzz
 * input to a file and calls the real entry point on it. Files live in one
 * directory per process under /dev/shm (memory, no disk wear; /tmp when
 * /dev/shm is missing) and are overwritten on every run, so a campaign of
 * millions of runs leaves nothing behind but that directory.
 *
 * Multi-file inputs (a Hugging Face directory, a tokenizer.json plus its
 * config plus a text) use a simple framing: the input is cut at lines of the
 * form
 *     \n@@ NAME\n
 * and each piece is the content of the part NAME (the bytes before the first
 * such line belong to no part and are ignored). A harness passes the names it
 * knows; pieces with other names are skipped, so the fuzzer can never write
 * outside the harness's directory. The separator is in each harness's
 * dictionary so that mutations can add, drop and reorder parts.
 */
#ifndef RG_FUZZ_UTIL_H
#define RG_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

/* libFuzzer's entry point, defined by each harness. The normal build
 * compiles the harnesses into tests/test_fuzz_regressions.c with this name
 * defined to fuzz_one_<harness>, to replay findings without libFuzzer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The per-process scratch directory (created on first use). Never fails:
 * a harness that cannot make it aborts, since every run would be void. */
const char *fuzz_dir(void);

/* Creates fuzz_dir()/NAME as a directory if needed; returns its path
 * (static storage, valid until the next call), or NULL when NAME cannot be
 * a directory there (e.g. a file of that name exists). */
const char *fuzz_subdir(const char *name);

/* Writes SIZE bytes to fuzz_dir()/NAME and returns that path (static
 * storage, valid until the next call with another name). */
const char *fuzz_write(const char *name, const uint8_t *data, size_t size);

/* Removes fuzz_dir()/NAME and everything below it, if present (what the
 * last input left). The whole fuzz_dir() is removed at exit. */
void fuzz_remove_tree(const char *name);

typedef struct {
  const char *name;    /* one of the names the harness passed */
  const uint8_t *data; /* points into the fuzz input */
  size_t size;
} fuzz_part;

/* Cuts DATA into parts at "\n@@ NAME\n" lines. Keeps at most MAX_PARTS
 * pieces whose NAME is one of NAMES[0..n_names); returns how many. */
int fuzz_split(const uint8_t *data, size_t size, const char *const *names, int n_names, fuzz_part *parts,
               int max_parts);

#endif

/* ---- oracles: facts every accepted file must satisfy ---- */

/* A parser that accepts a file must hand out tensors that the file holds:
 * shape products that fit in int64, nbytes equal to what the dtype and shape
 * imply (computed here in 128-bit arithmetic, independently of dequant.c),
 * and data whose first and last byte can be read (a tensor reaching past
 * the map faults here rather than later in a forward pass). A violation is
 * reported and aborts, so libFuzzer keeps the input as a crash. */
void fuzz_check_tensor(const rg_tensor *t, const char *where);

/* A refusal must name what is wrong with the file, never "out of memory":
 * a file whose sizes contradict themselves is refused before anything is
 * allocated for them (issue 17). Aborts when the current error says memory
 * ran out, so the input is kept as a finding; a harness that goes on after a
 * failed call checks here first, before the next call replaces the error. */
void fuzz_check_refusal(const char *where);
