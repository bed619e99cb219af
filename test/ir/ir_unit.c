/* ir_unit - unit tests of ir/ir.c: the builder, use lists under every
 * mutation primitive, op_clone with regions, and the printer/parser/verifier
 * on IR built in memory. Prints `ok` per test or a FAIL line; exits 1 when
 * any check fails. Run by test/ir/ir-unit.test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/ir.h"

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* Counts the entries (user, index) in v's use list. */
static int count_use(const Value *v, const Op *user, int index) {
  int n = 0;
  for (int i = 0; i < v->nuses; i++)
    n += v->uses[i].user == user && v->uses[i].index == index;
  return n;
}

/* Every operand of every op under b appears exactly once in its use list,
 * and every use of a value defined under b names a live operand slot. */
static bool value_uses_ok(const Value *v) {
  for (int i = 0; i < v->nuses; i++) {
    const Use *u = &v->uses[i];
    if (u->index >= u->user->noperands || u->user->operands[u->index] != v || !u->user->parent)
      return false;
  }
  return true;
}

static bool uses_ok(const Block *b) {
  for (int i = 0; i < b->nargs; i++)
    if (!value_uses_ok(b->args[i]))
      return false;
  for (const Op *o = b->first; o; o = o->next) {
    for (int i = 0; i < o->noperands; i++)
      if (count_use(o->operands[i], o, i) != 1)
        return false;
    for (int i = 0; i < o->nresults; i++)
      if (!value_uses_ok(o->results[i]))
        return false;
    for (int r = 0; r < o->nregions; r++)
      if (!uses_ok(o->regions[r]))
        return false;
  }
  return true;
}

static char *print_module(const Module *m) {
  char *s = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&s, &len);
  module_print(f, m);
  fclose(f);
  return s;
}

static int verify_quiet(const Module *m) { return module_verify(m, "unit", NULL); }

/* The module of text, parsed and verified; NULL (a failed check) when it
 * is not. */
static Module *parse_verified(const char *name, const char *text) {
  Module *m = module_parse(name, text, strlen(text), stderr);
  CHECK(m != NULL);
  if (m && verify_quiet(m) != 0) {
    CHECK(verify_quiet(m) == 0);
    module_destroy(m);
    m = NULL;
  }
  return m;
}

/* A small kernel: o[b, h, row0] = sum over a loop of loaded tiles. */
typedef struct Fixture {
  Module *m;
  Func *f;
  Value *t, *n, *c0, *c1, *init;
  Op *loop, *yield;
} Fixture;

static Fixture make_fixture(void) {
  Fixture x = {0};
  x.m = module_create();
  int dims[4] = {DIM_BATCH, DIM_SEQLEN_Q, 4, 16};
  Type args[2] = {type_tensor(ELEM_F32, 4, dims), type_index()};
  const char *names[2] = {"t", "n"};
  x.f = func_create(x.m, "k", args, names, 2, (SrcLoc){0});
  x.t = x.f->args[0];
  x.n = x.f->args[1];
  Builder b = builder_at_end(x.m, x.f->body);
  x.c0 = build_index(&b, 0);
  x.c1 = build_index(&b, 1);
  x.init = build_full(&b, type_tile(ELEM_F32, 8, 16, DIST_ROWS), 0);
  x.loop = build_for(&b, x.c0, x.n, false, &x.init, 1, "i");
  Builder in = builder_at_end(x.m, for_body(x.loop));
  Value *ld_ops[4] = {x.t, x.c0, x.c1, for_iv(x.loop)};
  Type tt = type_tile(ELEM_F32, 8, 16, DIST_ROWS);
  Value *ld = build_op(&in, OP_LOAD, ld_ops, 4, &tt, 1, 0)->results[0];
  Value *sum = build_binary(&in, OP_ADD, for_iter_arg(x.loop, 0), ld);
  x.yield = build_yield(&in, &sum, 1);
  Value *st_ops[5] = {x.t, x.c0, x.c1, x.c0, x.loop->results[0]};
  build_op(&b, OP_STORE, st_ops, 5, NULL, 0, 0);
  build_op(&b, OP_RETURN, NULL, 0, NULL, 0, 0);
  return x;
}

static void test_builder(void) {
  Fixture x = make_fixture();
  CHECK(verify_quiet(x.m) == 0);
  CHECK(uses_ok(x.f->body));
  CHECK(x.c0->nuses == 4); /* for lo, load, store twice */
  CHECK(count_use(x.c0, x.loop, 0) == 1);
  CHECK(for_iv(x.loop)->name && strcmp(for_iv(x.loop)->name, "i") == 0);
  CHECK(for_body(x.loop)->nargs == 2);
  CHECK(!for_is_parallel(x.loop));
  CHECK(block_terminator(for_body(x.loop)) == x.yield);
  CHECK(op_func(x.yield) == x.f);
  CHECK(op_is_inside(x.yield, x.loop));
  CHECK(value_defined_outside(x.c0, x.loop));
  CHECK(!value_defined_outside(for_iter_arg(x.loop, 0), x.loop));
  CHECK(!value_defined_outside(x.yield->operands[0], x.loop));
  CHECK(func_arg(x.f, "n") == x.n);
  Type bt = broadcast_type(type_tile(ELEM_F32, 8, 1, DIST_ROWS), type_tile(ELEM_F32, 1, 16, DIST_NONE), ELEM_I1);
  CHECK(bt.kind == TYPE_TILE && bt.rows == 8 && bt.cols == 16 && bt.elem == ELEM_I1);
  CHECK(broadcast_type(type_tile(ELEM_F32, 8, 2, 0), type_tile(ELEM_F32, 4, 2, 0), ELEM_F32).kind == TYPE_NONE);
  module_destroy(x.m);
  printf("ok builder\n");
}

static void test_set_operand_and_rauw(void) {
  Fixture x = make_fixture();
  Op *store = x.loop->next;
  op_set_operand(store, 3, x.c1); /* c0 at index 3 becomes c1 */
  CHECK(count_use(x.c0, store, 3) == 0);
  CHECK(count_use(x.c1, store, 3) == 1);
  CHECK(count_use(x.c0, store, 1) == 1);
  CHECK(uses_ok(x.f->body));
  int before = x.c0->nuses + x.c1->nuses;
  value_replace_all_uses(x.c0, x.c1);
  CHECK(x.c0->nuses == 0);
  CHECK(x.c1->nuses == before);
  CHECK(store->operands[1] == x.c1 && store->operands[3] == x.c1 && x.loop->operands[0] == x.c1);
  CHECK(uses_ok(x.f->body));
  CHECK(verify_quiet(x.m) == 0);
  /* c0 is dead now and can go. */
  op_erase(x.c0->def);
  CHECK(uses_ok(x.f->body));
  CHECK(verify_quiet(x.m) == 0);
  module_destroy(x.m);
  printf("ok set_operand/replace_all_uses\n");
}

static void test_erase_operand(void) {
  Fixture x = make_fixture();
  /* A yield in an if with operands [a, b, a]: erasing operand 0 renumbers
   * the remaining uses, including a's second one. */
  Builder b = builder_before(x.m, x.loop);
  Value *cond = build_cmp(&b, "lt", x.c0, x.n);
  Type ts[3] = {type_index(), type_index(), type_index()};
  Op *ifop = build_if(&b, cond, ts, 3);
  Builder tb = builder_at_end(x.m, ifop->regions[0]);
  Value *ys[3] = {x.c0, x.c1, x.c0};
  Op *y = build_yield(&tb, ys, 3);
  Builder eb = builder_at_end(x.m, ifop->regions[1]);
  build_yield(&eb, ys, 3);
  CHECK(verify_quiet(x.m) == 0);
  op_erase_operand(y, 0);
  CHECK(y->noperands == 2 && y->operands[0] == x.c1 && y->operands[1] == x.c0);
  CHECK(count_use(x.c0, y, 0) == 0 && count_use(x.c0, y, 1) == 1 && count_use(x.c1, y, 0) == 1);
  CHECK(count_use(x.c0, y, 2) == 0);
  CHECK(uses_ok(x.f->body));
  /* The if now yields 2 values for 3 results: the verifier sees it. */
  CHECK(verify_quiet(x.m) > 0);
  op_erase_operand(ifop->regions[1]->last, 0);
  op_erase_result(ifop, 0);
  CHECK(ifop->nresults == 2 && ifop->results[1]->result_index == 1);
  CHECK(verify_quiet(x.m) == 0);
  op_append_operand(x.m, y, x.n);
  CHECK(count_use(x.n, y, 2) == 1);
  CHECK(uses_ok(x.f->body));
  module_destroy(x.m);
  printf("ok erase_operand\n");
}

static void test_erase_op_with_regions(void) {
  Fixture x = make_fixture();
  int c1_uses = x.c1->nuses, t_uses = x.t->nuses;
  Op *store = x.loop->next;
  op_erase(store); /* the loop result is unused now */
  CHECK(x.loop->results[0]->nuses == 0);
  op_erase(x.loop);
  /* The load inside the loop used c1 and t: those uses are gone. */
  CHECK(x.c1->nuses == c1_uses - 2);
  CHECK(x.t->nuses == t_uses - 2);
  CHECK(x.c0->nuses == 0);
  CHECK(x.init->nuses == 0);
  CHECK(x.loop->parent == NULL);
  CHECK(uses_ok(x.f->body));
  CHECK(verify_quiet(x.m) == 0);
  module_destroy(x.m);
  printf("ok erase\n");
}

static void test_erase_block_arg(void) {
  Fixture x = make_fixture();
  /* Add a second iter arg, then remove the first one entirely: operand,
   * block argument, yield value and result. */
  Builder b = builder_before(x.m, x.loop);
  Value *init2 = build_full(&b, type_tile(ELEM_F32, 8, 1, DIST_ROWS), 1);
  op_append_operand(x.m, x.loop, init2);
  Value *a2 = block_add_arg(x.m, for_body(x.loop), init2->type, "acc2");
  op_append_operand(x.m, x.yield, a2);
  op_append_result(x.m, x.loop, init2->type);
  CHECK(verify_quiet(x.m) == 0);
  Op *store = x.loop->next;
  op_erase(store);
  Op *add = x.yield->prev, *load = for_body(x.loop)->first;
  op_erase_operand(x.yield, 0);
  op_erase(add);
  op_erase(load);
  CHECK(for_iter_arg(x.loop, 0)->nuses == 0);
  block_erase_arg(for_body(x.loop), 1);
  op_erase_operand(x.loop, 2);
  op_erase_result(x.loop, 0);
  CHECK(for_body(x.loop)->nargs == 2 && for_iter_arg(x.loop, 0) == a2 && a2->arg_index == 1);
  CHECK(count_use(init2, x.loop, 2) == 1 && count_use(a2, x.yield, 0) == 1);
  CHECK(x.loop->results[0]->result_index == 0);
  CHECK(uses_ok(x.f->body));
  CHECK(verify_quiet(x.m) == 0);
  /* Kernel arguments: the body's block args are the func's args. */
  Value *extra = block_add_arg(x.m, x.f->body, type_index(), "extra");
  CHECK(x.f->nargs == 3 && x.f->args[2] == extra);
  block_erase_arg(x.f->body, 2);
  CHECK(x.f->nargs == 2);
  module_destroy(x.m);
  printf("ok block_erase_arg\n");
}

static void test_clone(void) {
  Fixture x = make_fixture();
  int c1_uses = x.c1->nuses;
  Builder b = builder_after(x.m, x.loop);
  Op *c = op_clone(&b, x.loop, NULL);
  CHECK(c != x.loop && c->kind == OP_FOR && c->prev == x.loop);
  CHECK(c->nresults == 1 && for_body(c)->nargs == 2);
  CHECK(strcmp(for_iv(c)->name, "i") == 0);
  CHECK(for_is_parallel(c) == for_is_parallel(x.loop));
  Op *load = for_body(c)->first, *add = load->next, *y = add->next;
  CHECK(load->kind == OP_LOAD && add->kind == OP_ADD && y->kind == OP_YIELD);
  CHECK(load->operands[3] == for_iv(c));      /* remapped into the clone */
  CHECK(add->operands[0] == for_iter_arg(c, 0));
  CHECK(add->operands[1] == load->results[0]);
  CHECK(y->operands[0] == add->results[0]);
  CHECK(load->operands[2] == x.c1);           /* defined outside: shared */
  CHECK(x.c1->nuses == c1_uses + 1);
  CHECK(uses_ok(x.f->body));
  CHECK(verify_quiet(x.m) == 0);
  /* With a map: the clone's init comes from another value. */
  Builder b2 = builder_before(x.m, c);
  Value *other = build_full(&b2, x.init->type, 2);
  ValueMap vm = {0};
  valuemap_put(x.m, &vm, x.init, other);
  Op *c2 = op_clone(&b2, x.loop, &vm);
  CHECK(c2->operands[2] == other && count_use(other, c2, 2) == 1);
  CHECK(valuemap_get(&vm, x.loop->results[0]) == c2->results[0]);
  CHECK(valuemap_get(&vm, for_iv(x.loop)) == for_iv(c2));
  CHECK(valuemap_get(&vm, x.c0) == x.c0);
  CHECK(verify_quiet(x.m) == 0);
  /* The clones keep the name "i": the printer makes it unique. */
  char *text = print_module(x.m);
  CHECK(strstr(text, "for %i = ") && strstr(text, "for %i_1 = ") && strstr(text, "for %i_2 = "));
  Module *back = module_parse("clone", text, strlen(text), stderr);
  CHECK(back != NULL);
  if (back) {
    char *again = print_module(back);
    CHECK(strcmp(text, again) == 0);
    CHECK(verify_quiet(back) == 0);
    free(again);
    module_destroy(back);
  }
  free(text);
  module_destroy(x.m);
  printf("ok clone\n");
}

static void test_move(void) {
  Fixture x = make_fixture();
  Op *c1op = x.c1->def, *full = x.init->def;
  op_move_before(full, c1op);
  CHECK(full->next == c1op && c1op->prev == full && x.c0->def->next == full);
  op_move_before(full, full); /* moving an op before itself changes nothing */
  CHECK(full->next == c1op && full->parent == x.f->body);
  /* To the end of the loop body: before its yield. */
  Builder b = builder_before(x.m, x.loop);
  Value *k = build_index(&b, 7);
  op_move_to_end(k->def, for_body(x.loop));
  CHECK(k->def->next == x.yield && k->def->parent == for_body(x.loop));
  CHECK(verify_quiet(x.m) == 0);
  module_destroy(x.m);
  printf("ok move\n");
}

static void test_attrs(void) {
  Module *m = module_create();
  AttrList al = {0};
  attr_set_int(m, &al, "a", 1);
  attr_set_word(m, &al, "b", "rows");
  attr_set_float(m, &al, "c", 0.5);
  attr_set_int(m, &al, "a", 2); /* overwrite keeps its place */
  CHECK(al.n == 3 && strcmp(al.v[0].key, "a") == 0 && al.v[0].i == 2);
  CHECK(attr_float(&al, "a", 0) == 2.0 && attr_float(&al, "c", 0) == 0.5);
  CHECK(strcmp(attr_str(&al, "b", ""), "rows") == 0 && attr_int(&al, "b", -1) == -1);
  attr_remove(&al, "a");
  CHECK(al.n == 2 && strcmp(al.v[0].key, "b") == 0 && !attr_get(&al, "a"));
  module_destroy(m);
  printf("ok attrs\n");
}

/* Floats print in the shortest form that reads back to the same double,
 * always as floats; unnamed values are numbered in print order. */
static void test_print_values(void) {
  static const double vals[] = {0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 1e300, -2.5e-7, INFINITY, -INFINITY, 0x1p-1074};
  enum { N = sizeof vals / sizeof vals[0] };
  Module *m = module_create();
  Func *f = func_create(m, "consts", NULL, NULL, 0, (SrcLoc){0});
  Builder b = builder_at_end(m, f->body);
  for (int i = 0; i < N; i++)
    build_const(&b, type_scalar(ELEM_F32), vals[i]);
  Value *nan_v = build_const(&b, type_scalar(ELEM_F32), NAN);
  nan_v->name = "x";
  Value *dup = build_const(&b, type_scalar(ELEM_F32), 2);
  dup->name = "x";
  Value *num = build_const(&b, type_scalar(ELEM_F32), 2);
  num->name = "12"; /* digits-only names are the printer's own numbering */
  Op *s = build_op(&b, OP_CONST, NULL, 0, (Type[]){type_index()}, 1, 0);
  attr_set_str(m, &s->attrs, "value", "a \"q\"\n");
  attr_set_word(m, &s->attrs, "w", "inf");
  build_op(&b, OP_RETURN, NULL, 0, NULL, 0, 0);
  char *text = print_module(m);
  CHECK(strstr(text, "%0 = const {value = 0.0} : f32"));
  CHECK(strstr(text, "%1 = const {value = -0.0} : f32"));
  CHECK(strstr(text, "%2 = const {value = 1.0} : f32"));
  CHECK(strstr(text, "{value = 0.1}"));
  CHECK(strstr(text, "{value = 0.3333333333333333}"));
  CHECK(strstr(text, "{value = 1e+300}"));
  CHECK(strstr(text, "{value = inf}") && strstr(text, "{value = -inf}"));
  CHECK(strstr(text, "%x = const {value = nan}") && strstr(text, "%x_1 = const {value = 2.0}"));
  CHECK(strstr(text, "%10 = const {value = 2.0}"));
  CHECK(strstr(text, "{value = \"a \\\"q\\\"\\n\", w = \"inf\"}"));
  Module *back = module_parse("values", text, strlen(text), stderr);
  CHECK(back != NULL);
  if (back) {
    Op *o = back->funcs[0]->body->first;
    for (int i = 0; i < N; i++, o = o->next) {
      const Attr *a = attr_get(&o->attrs, "value");
      CHECK(a && a->kind == ATTR_FLOAT && memcmp(&a->f, &vals[i], sizeof(double)) == 0);
    }
    CHECK(isnan(attr_float(&o->attrs, "value", 0)));
    CHECK(o->results[0]->name && strcmp(o->results[0]->name, "x") == 0);
    CHECK(o->next->next->results[0]->name == NULL);
    char *again = print_module(back);
    CHECK(strcmp(text, again) == 0);
    free(again);
    module_destroy(back);
  }
  free(text);
  module_destroy(m);
  printf("ok print values\n");
}

/* The verifier catches what passes typically break. */
static void test_verifier(void) {
  Fixture x = make_fixture();
  /* A use before its definition. */
  Op *c1op = x.c1->def;
  op_move_before(c1op, x.yield);
  CHECK(verify_quiet(x.m) > 0);
  op_move_before(c1op, x.init->def);
  CHECK(verify_quiet(x.m) == 0);
  /* A stale use list entry. */
  Value *saved = x.yield->operands[0];
  x.yield->operands[0] = x.init; /* bypassing op_set_operand */
  CHECK(verify_quiet(x.m) > 0);
  x.yield->operands[0] = saved;
  CHECK(verify_quiet(x.m) == 0);
  /* Op after a terminator. */
  Builder b = builder_at_end(x.m, x.f->body);
  build_index(&b, 3);
  CHECK(verify_quiet(x.m) > 0);
  module_destroy(x.m);
  printf("ok verifier\n");
}

/* Does verifying m report a message containing `want`? */
static bool verify_says(const Module *m, const char *want) {
  char *s = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&s, &len);
  module_verify(m, "unit", f);
  fclose(f);
  bool found = s && strstr(s, want);
  if (!found)
    printf("FAIL: no '%s' in:\n%s", want, s ? s : "");
  free(s);
  return found;
}

/* Warp specialization's rules that the text form cannot break (the parser
 * builds warp_roles without operands, results or block arguments, and ring
 * without regions): IR mutated in memory. */
static void test_verifier_roles(void) {
  static const char text[] =
      "kernel @k(%n: index) {\n"
      "  warp_roles {producer_warps = 1} {\n"
      "    yield\n"
      "  } consumer {\n"
      "    yield\n"
      "  }\n"
      "  return\n"
      "}\n";
  Module *m = parse_verified("roles", text);
  if (!m)
    return;
  Func *f = m->funcs[0];
  Op *roles = f->body->first;
  Value *arg = block_add_arg(m, roles->regions[0], type_index(), "a");
  CHECK(verify_says(m, "warp_roles (2:3): producer region has arguments"));
  block_erase_arg(roles->regions[0], arg->arg_index);
  op_append_operand(m, roles, f->args[0]);
  CHECK(verify_says(m, "warp_roles %n (2:3): expects 0 operands, has 1"));
  op_erase_operand(roles, 0);
  op_append_result(m, roles, type_index());
  CHECK(verify_says(m, "expects 0 results, has 1"));
  op_erase_result(roles, 0);
  CHECK(verify_quiet(m) == 0);
  Builder b = builder_before(m, roles);
  Type ring = type_ring(type_tile(ELEM_BF16, 16, 16, DIST_NONE));
  Op *r = build_op(&b, OP_RING, NULL, 0, &ring, 1, 1);
  op_set_attr_int(r, "stages", 2);
  CHECK(verify_says(m, "%0 = ring (2:3): only for, if and warp_roles have regions"));
  module_destroy(m);
  printf("ok verifier roles\n");
}

/* The backward's memory and matmul forms in the interpreter: 1 x C loads
 * and stores of a rank 3 tensor (positions along the columns, past the end
 * read 0 / skipped), store {reduce = add}, matmul {transpose_a}. */
static void test_interp_backward_forms(void) {
  static const char text[] =
      "kernel @k(%lse: tensor<f32, [batch, 2, seqlen_q]>, %acc: tensor<f32, [batch, seqlen_q, 2, 2]>,\n"
      "          %out: tensor<f32, [batch, 2, seqlen_q]>, %batch: index, %seqlen_q: index, %seqlen_k: index) {\n"
      "  %c0 = const {value = 0} : index\n"
      "  %c1 = const {value = 1} : index\n"
      "  %c2 = const {value = 2} : index\n"
      "  %r = load %lse, %c0, %c1, %c1 : tile<1x4xf32>\n"
      "  store %out, %c0, %c0, %c2, %r\n"
      "  %a = full {value = 2.0} : tile<3x2xf32>\n"
      "  %b = full {value = 0.5} : tile<3x2xf32>\n"
      "  %m = matmul %a, %b {transpose_a = 1} : tile<2x2xf32>\n"
      "  store %acc, %c0, %c1, %c1, %m {reduce = add}\n"
      "  return\n"
      "}\n";
  Module *m = parse_verified("backward_forms", text);
  if (!m)
    return;
  enum { SQ = 5 };
  double lse[2 * SQ], acc[SQ * 2 * 2], out[2 * SQ];
  for (int i = 0; i < 2 * SQ; i++) {
    lse[i] = 10 * (i / SQ) + i % SQ; /* head h, position p: 10h + p */
    out[i] = -1;
  }
  for (int i = 0; i < SQ * 4; i++)
    acc[i] = 1;
  InterpBinding bs[3] = {
      {"lse", lse, {1, 2, SQ}, {2 * SQ, SQ, 1}},
      {"acc", acc, {1, SQ, 2, 2}, {SQ * 4, 4, 2, 1}},
      {"out", out, {1, 2, SQ}, {2 * SQ, SQ, 1}},
  };
  InterpOptions o;
  interp_options_init(&o);
  o.round_casts = false;
  char err[256] = "";
  int rc = interp_run(m->funcs[0], bs, 3, 1, SQ, SQ, &o, err, sizeof err);
  CHECK(rc == 0);
  if (rc)
    printf("  %s\n", err);
  /* positions 1..4 of head 1 are 11..14; stored at head 0 from position 2:
   * 11, 12, 13 land, 14 is past the end (skipped) */
  CHECK(out[0] == -1 && out[1] == -1 && out[2] == 11 && out[3] == 12 && out[4] == 13);
  CHECK(out[SQ] == -1);
  /* a^T b = 3 * 2 * 0.5 = 3 per element, added to 1: rows 1 and 2 of head 1 */
  for (int r = 0; r < SQ; r++)
    for (int h = 0; h < 2; h++)
      for (int c = 0; c < 2; c++) {
        bool hit = h == 1 && (r == 1 || r == 2);
        CHECK(acc[r * 4 + h * 2 + c] == (hit ? 4.0 : 1.0));
      }
  module_destroy(m);
  printf("ok interp backward forms\n");
}

/* Column windows: matmul {b_col0} multiplies by B's columns b_col0.. only,
 * store {col0} writes the tile into the tensor's columns col0.. (dQ's
 * chunks in the backward). */
static void test_interp_column_windows(void) {
  static const char text[] =
      "kernel @k(%acc: tensor<f32, [batch, seqlen_q, 1, 48]>, %batch: index, %seqlen_q: index,\n"
      "          %seqlen_k: index) {\n"
      "  %c0 = const {value = 0} : index\n"
      "  %a = full {value = 1.0} : tile<2x3xf32>\n"
      "  %i = iota {axis = 1} : tile<1x48xindex>\n"
      "  %f = cast %i : tile<1x48xf32>\n"
      "  %z = full {value = 0.0} : tile<3x48xf32>\n"
      "  %b = add %z, %f : tile<3x48xf32>\n"
      "  %m = matmul %a, %b {b_col0 = 16} : tile<2x16xf32>\n"
      "  store %acc, %c0, %c0, %c0, %m {reduce = add, col0 = 32}\n"
      "  return\n"
      "}\n";
  Module *m = parse_verified("column_windows", text);
  if (!m)
    return;
  enum { SQ = 2, C = 48 };
  double acc[SQ * C];
  for (int i = 0; i < SQ * C; i++)
    acc[i] = 1;
  InterpBinding bs[1] = {{"acc", acc, {1, SQ, 1, C}, {SQ * C, C, C, 1}}};
  InterpOptions o;
  interp_options_init(&o);
  o.round_casts = false;
  char err[256] = "";
  int rc = interp_run(m->funcs[0], bs, 1, 1, SQ, SQ, &o, err, sizeof err);
  CHECK(rc == 0);
  if (rc)
    printf("  %s\n", err);
  /* column j of the product is 3 * (16 + j), added at column 32 + j */
  for (int r = 0; r < SQ; r++)
    for (int c = 0; c < C; c++)
      CHECK(acc[r * C + c] == (c >= 32 ? 1 + 3.0 * (16 + c - 32) : 1.0));
  module_destroy(m);
  printf("ok interp column windows\n");
}

int main(void) {
  test_builder();
  test_set_operand_and_rauw();
  test_erase_operand();
  test_erase_op_with_regions();
  test_erase_block_arg();
  test_clone();
  test_move();
  test_attrs();
  test_print_values();
  test_verifier();
  test_verifier_roles();
  test_interp_backward_forms();
  test_interp_column_windows();
  if (failures)
    printf("%d check(s) failed\n", failures);
  else
    printf("all ir unit tests passed\n");
  return failures ? 1 : 0;
}
