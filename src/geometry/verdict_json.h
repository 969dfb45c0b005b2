/* verdict_json.h: OUT_DIR/verdict.json, the verdict of a geometry run with
 * the per-step evidence behind it and Lan et al.'s claims checked one by
 * one (the layout is in docs/geometry-verdict.md). Written atomically. */
#ifndef RG_GEOMETRY_VERDICT_JSON_H
#define RG_GEOMETRY_VERDICT_JSON_H

#include "geometry/migration.h"
#include "geometry/verdict.h"

int rg_verdict_write_json(const char *path, const char *plan_sha256, const rg_verdict *v, const rg_lan_claim *claims,
                          const rg_migration_row *rows, int n_steps, int n_layers);

#endif
