/* provenance.h: where a report's numbers come from.
 *
 * A shared report must say which program made it and from which model: the
 * refgeo version, the date the report was written (UTC), and the model the
 * run started from (config.ini's `model` key) with its sha256, the digest
 * `sha256sum` prints and model hubs list. A model folder (Hugging Face) gets
 * one digest per regular file, by name.
 */
#ifndef RG_PROVENANCE_H
#define RG_PROVENANCE_H

typedef struct {
  char *version;      /* refgeo's version */
  char *date_utc;     /* ISO 8601, e.g. 2026-12-03T16:31:03Z */
  char *model;        /* config.ini's model, or NULL when the run has no config.ini */
  char *model_sha256; /* "HEX  NAME\n" lines as sha256sum prints them; NULL
                       * when there is no model or it is not on this machine */
  char *model_note;   /* why model_sha256 is NULL, or NULL */
} rg_provenance;

/* Fills P for the run whose resolved configuration text is CONFIG_INI (NULL
 * when the run has none). Hashing reads the whole model (about 40 s for a
 * 14 GB 7B model). A model that is named but missing is not an error: the
 * note says so. Returns 0, or -1 with the error set (out of memory, a read
 * error, a config.ini that does not parse). */
int rg_provenance_collect(rg_provenance *p, const char *config_ini);
void rg_provenance_free(rg_provenance *p);

#endif
