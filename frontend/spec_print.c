/* spec_print.c - the `-emit=spec` form of checked kernels, and expressions in
 * source syntax, fully parenthesized, so FileCheck tests read them exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "frontend/frontend.h"

/* The shortest "%g" spelling that reads back as the same double. */
static void print_num(FILE *out, double v) {
  char buf[64];
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  fputs(buf, out);
}

static const char *var_name(ExprVar v) {
  static const char *const names[] = {"s", "b", "h", "q", "k", "seqlen_q", "seqlen_k"};
  return (unsigned)v < 7 ? names[v] : "?";
}

static const char *binary_op(ExprKind k) {
  switch (k) {
  case EXPR_ADD: return "+";
  case EXPR_SUB: return "-";
  case EXPR_MUL: return "*";
  case EXPR_DIV: return "/";
  case EXPR_MOD: return "%";
  case EXPR_LT: return "<";
  case EXPR_LE: return "<=";
  case EXPR_GT: return ">";
  case EXPR_GE: return ">=";
  case EXPR_EQ: return "==";
  case EXPR_NE: return "!=";
  case EXPR_AND: return "&&";
  case EXPR_OR: return "||";
  default: return NULL;
  }
}

static const char *func_name(ExprKind k) {
  switch (k) {
  case EXPR_MIN: return "min";
  case EXPR_MAX: return "max";
  case EXPR_TANH: return "tanh";
  case EXPR_EXP: return "exp";
  case EXPR_EXP2: return "exp2";
  case EXPR_LOG: return "log";
  case EXPR_LOG2: return "log2";
  case EXPR_SQRT: return "sqrt";
  case EXPR_ABS: return "abs";
  case EXPR_FLOOR: return "floor";
  default: return NULL;
  }
}

void fe_print_expr(FILE *out, const Expr *e) {
  if (!e) {
    fputs("<null>", out);
    return;
  }
  switch (e->kind) {
  case EXPR_NUM:
    if (e->num < 0 || signbit(e->num))
      fputc('(', out);
    print_num(out, e->num);
    if (e->num < 0 || signbit(e->num))
      fputc(')', out);
    return;
  case EXPR_VAR:
    fputs(var_name(e->var), out);
    return;
  case EXPR_NEG:
  case EXPR_NOT:
    fputs(e->kind == EXPR_NEG ? "(-" : "(!", out);
    fe_print_expr(out, e->a);
    fputc(')', out);
    return;
  case EXPR_INPUT: {
    fputs(e->name ? e->name : "?", out);
    const Expr *idx[4] = {e->a, e->b, e->c, e->d};
    for (int i = 0; i < 4 && idx[i]; i++) {
      fputs(i ? ", " : "[", out);
      fe_print_expr(out, idx[i]);
    }
    if (e->a)
      fputc(']', out);
    return;
  }
  case EXPR_SELECT:
    fputc('(', out);
    fe_print_expr(out, e->a);
    fputs(" ? ", out);
    fe_print_expr(out, e->b);
    fputs(" : ", out);
    fe_print_expr(out, e->c);
    fputc(')', out);
    return;
  default:
    break;
  }
  const char *op = binary_op(e->kind);
  if (op) {
    fputc('(', out);
    fe_print_expr(out, e->a);
    fprintf(out, " %s ", op);
    fe_print_expr(out, e->b);
    fputc(')', out);
    return;
  }
  fprintf(out, "%s(", func_name(e->kind) ? func_name(e->kind) : "?");
  fe_print_expr(out, e->a);
  if (e->b) {
    fputs(", ", out);
    fe_print_expr(out, e->b);
  }
  fputc(')', out);
}

static const char *mask_kind_name(MaskKind k) {
  switch (k) {
  case MASK_NONE: return "none";
  case MASK_CAUSAL: return "causal";
  case MASK_WINDOW: return "window";
  case MASK_EXPR: return "expr";
  }
  return "?";
}

static const char *mode_name(Mode m) {
  switch (m) {
  case MODE_FORWARD: return "forward";
  case MODE_DECODE: return "decode";
  }
  return "?";
}

/* Schedule fields print "auto" when 0 (the compiler chooses). */
static void print_choice(FILE *out, const char *name, int v) {
  if (v)
    fprintf(out, " %s=%d", name, v);
  else
    fprintf(out, " %s=auto", name);
}

/* input NAME: TYPE[DIMS], one line each, and the launch condition. */
static void print_inputs(FILE *out, const KernelSpec *k) {
  static const char *const types[] = {"i32", "f32", "f16", "bf16"};
  for (int i = 0; i < k->ninputs; i++) {
    const SpecInput *in = &k->inputs[i];
    fprintf(out, "  input      %s: %s", in->name, types[in->type]);
    for (int d = 0; d < in->rank; d++) {
      fputs(d ? ", " : "[", out);
      int v = in->dims[d];
      if (v > 0)
        fprintf(out, "%d", v);
      else
        fputs(v == SPEC_DIM_BATCH ? "batch" : v == SPEC_DIM_SEQLEN_Q ? "seqlen_q" : "seqlen_k", out);
    }
    fputs(in->rank ? "]\n" : "\n", out);
  }
  if (k->require_q_le_k)
    fputs("  require    seqlen_q <= seqlen_k\n", out);
  if (k->require_k_le_q)
    fputs("  require    seqlen_k <= seqlen_q\n", out);
}

static void print_kernel(FILE *out, const KernelSpec *k) {
  fprintf(out, "kernel %s\n", k->name);
  fprintf(out, "  dtype      %s\n", k->dtype == DTYPE_F16 ? "fp16" : "bf16");
  fprintf(out, "  head_dim   %d\n", k->head_dim);
  fprintf(out, "  v_head_dim %d\n", k->v_head_dim);
  fprintf(out, "  heads      %d\n", k->heads);
  fprintf(out, "  kv_heads   %d\n", k->kv_heads);
  fputs("  scale      ", out);
  if (k->scale_expr)
    fe_print_expr(out, k->scale_expr);
  else
    print_num(out, k->scale);
  fputs("\n  dropout    ", out);
  print_num(out, k->dropout);
  if (k->dropout_torch)
    fputs(" (mask torch)", out);
  fprintf(out, "\n  mode       %s\n", mode_name(k->mode));
  if (k->mode == MODE_FORWARD) {
    fprintf(out, "  grad       %s\n", k->grad ? "true" : "false");
    if (k->varlen)
      fputs("  varlen     true\n", out);
  }
  if (k->split)
    fprintf(out, "  split      %d\n", k->split);
  else
    fputs("  split      auto\n", out);
  if (k->mode == MODE_DECODE) { /* the decode-only fields */
    if (k->cache == CACHE_PAGED)
      fprintf(out, "  cache      paged(%d)\n", k->page_size);
    else
      fputs("  cache      contiguous\n", out);
    fprintf(out, "  q_len_max  %d\n", k->q_len_max ? k->q_len_max : SPEC_MAX_Q_LEN);
    if (k->has_unified_max) {
      fputs("  unified_max ", out);
      print_num(out, k->unified_max);
      fputc('\n', out);
    } else {
      fputs("  unified_max off\n", out);
    }
  }
  print_inputs(out, k);
  fprintf(out, "  mask_kind  %s", mask_kind_name(k->mask_kind));
  if (k->mask_kind == MASK_WINDOW)
    fprintf(out, " left=%d right=%d", k->window_left, k->window_right);
  fputs("\n  mask       ", out);
  if (k->mask)
    fe_print_expr(out, k->mask);
  else
    fputs("none", out);
  fputs("\n  score      ", out);
  if (k->score)
    fe_print_expr(out, k->score);
  else
    fputs("s", out);
  fputs("\n  schedule  ", out);
  print_choice(out, "tile_q", k->schedule.tile_q);
  print_choice(out, "tile_kv", k->schedule.tile_kv);
  print_choice(out, "warps", k->schedule.warps);
  print_choice(out, "stages", k->schedule.stages);
  if (k->schedule.overlap)
    fprintf(out, " overlap=%d", k->schedule.overlap > 0);
  if (k->schedule.producer)
    fprintf(out, " producer=%d", k->schedule.producer > 0);
  if (k->schedule.tma)
    fprintf(out, " tma=%d", k->schedule.tma > 0);
  if (k->schedule.pingpong)
    fprintf(out, " pingpong=%d", k->schedule.pingpong > 0);
  if (k->schedule.persistent)
    fprintf(out, " persistent=%d", k->schedule.persistent > 0);
  fputc('\n', out);
}

void fe_print_spec(FILE *out, const SpecFile *spec) {
  if (!spec)
    return;
  for (int i = 0; i < spec->nkernels; i++)
    print_kernel(out, spec->kernels[i]);
}
