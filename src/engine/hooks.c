/* hooks.c: TransformerLens-style hook names ("blocks.L.hook_SITE"). */
#include "engine/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static const char *const SITE_NAMES[RG_HOOK_N_SITES] = {"resid_pre", "attn_out", "resid_mid", "mlp_out",
                                                         "resid_post"};

const char *rg_hook_site_name(rg_hook_site site) {
  return site >= 0 && site < RG_HOOK_N_SITES ? SITE_NAMES[site] : "?";
}

char *rg_hook_name(rg_hook_site site, int layer, char *buf, size_t n) {
  snprintf(buf, n, "blocks.%d.hook_%s", layer, rg_hook_site_name(site));
  return buf;
}

int rg_hook_parse(const char *name, rg_hook_site *site, int *layer) {
  const char *p = name;
  if (strncmp(p, "blocks.", 7) != 0) return rg_error_set("%s: hook name must start with \"blocks.\"", name);
  p += 7;
  if (*p < '0' || *p > '9') return rg_error_set("%s: expected a layer number after \"blocks.\"", name);
  char *end;
  long l = strtol(p, &end, 10);
  if (l > 1000000 || strncmp(end, ".hook_", 6) != 0)
    return rg_error_set("%s: expected blocks.L.hook_SITE", name);
  for (int s = 0; s < RG_HOOK_N_SITES; s++)
    if (strcmp(end + 6, SITE_NAMES[s]) == 0) {
      *site = (rg_hook_site)s;
      *layer = (int)l;
      return 0;
    }
  return rg_error_set("%s: unknown hook site (resid_pre, attn_out, resid_mid, mlp_out, resid_post)", name);
}
