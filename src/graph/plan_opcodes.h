/* Stitching plan instructions, all in one place (after Lua's lopcodes.h).
 * They are PW_INSTR_*; PW_OP_* are the model's op ids (src/ops/op_table.h).
 *
 * A plan is a flat array of pw_instr run by one dispatch loop
 * (plan.c: pw_plan_run) over three value spaces:
 *
 *   T[i]  temporaries: the register file of the run, NONE when free
 *   P[i]  parameters: the caller's arguments (borrowed, never released)
 *   K[i]  constants: owned by the plan (strings, ints, constant tuples)
 *
 * An operand is one 32-bit word naming a value in one of the spaces:
 *
 *   bits 31..30  space (PW_SPACE_TEMP, PW_SPACE_PARAM, PW_SPACE_CONST)
 *   bit  29      MOVE: the reference moves out of T (which becomes NONE)
 *                instead of being retained; only in TUPLE and RETURN
 *   bits 28..0   index within the space
 *
 * V(w) below is the value operand w names; O[c..c+n) is the run of n
 * operand words starting at c in the plan's operand pool.
 *
 * A call's arguments are borrowed by the callee; its result is a new
 * reference stored in T[A]. FREE comes right after the last user of a
 * value (liveness, docs/codegen.md), so every T slot is NONE again when the
 * plan returns. */
#ifndef PW_PLAN_OPCODES_H
#define PW_PLAN_OPCODES_H

#include <stdint.h>

enum {
    PW_SPACE_TEMP = 0,
    PW_SPACE_PARAM = 1,
    PW_SPACE_CONST = 2
};

#define PW_OPND_SPACE_SHIFT 30
#define PW_OPND_MOVE (1u << 29)
#define PW_OPND_INDEX_MASK (PW_OPND_MOVE - 1u)
#define PW_OPND(space, index) (((uint32_t)(space) << PW_OPND_SPACE_SHIFT) | (uint32_t)(index))
#define PW_OPND_SPACE(w) ((w) >> PW_OPND_SPACE_SHIFT)
#define PW_OPND_INDEX(w) ((w) & PW_OPND_INDEX_MASK)

/* Most arguments one call may take (positional and keyword together). */
#define PW_PLAN_MAX_CALL_ARGS 1024
/* Most operands of any kind a plan may have. */
#define PW_PLAN_MAX_INDEX PW_OPND_INDEX_MASK

typedef enum pw_instr_op {
/*  instruction        operands   effect                                                     */
    PW_INSTR_CALL,    /* A B C N  T[A] := fn[B](V(O[C]), ..., V(O[C+N-1]))   bound op       */
    PW_INSTR_CALLSUB, /* A B C N  T[A] := sub[B](V(O[C]), ..., V(O[C+N-1]))  submodule table */
    PW_INSTR_GETITEM, /* A B C    T[A] := retain(V(B)[C])   V(B) must be a tuple; C signed    */
    PW_INSTR_TUPLE,   /* A C N    T[A] := (V(O[C]), ...)    each item retained, or moved      */
    PW_INSTR_FREE,    /* A        release(T[A]); T[A] := NONE                                 */
    PW_INSTR_RETURN,  /* B        *out := V(B)              moved if MOVE, else retained      */
    PW_INSTR_COUNT_
} pw_instr_op;

/* One instruction: 16 bytes. */
typedef struct pw_instr {
    uint8_t op;  /* pw_instr_op */
    uint8_t unused;
    uint16_t n;  /* operand count (CALL, CALLSUB, TUPLE) */
    uint32_t a;  /* destination temporary */
    uint32_t b;  /* callable index, or an operand word (GETITEM, RETURN) */
    uint32_t c;  /* first operand in the pool, or the getitem index (int32) */
} pw_instr;

#endif
