/* Liveness and registers (docs/codegen.md): for each value its last user;
 * FREE after it unless that user builds the output (then the reference
 * moves to the caller); values share registers once freed, which gives the
 * compact instructions of plan_opcodes.h. */
#include "plan_internal.h"

static bool is_temp(uint32_t w) { return PW_OPND_SPACE(w) == PW_SPACE_TEMP; }

pw_status pw_plan_analyse(pw_plan *p) {
    int nv = p->nvalues;
    int *last_use = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *def_at = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *count = pw_host_calloc((size_t)p->nfops + 1, sizeof(int));
    bool *freed = pw_host_calloc((size_t)nv + 1, sizeof(bool));
    pw_status s = PW_OK;
    if (!last_use || !def_at || !count || !freed) {
        s = pw_plan_oom();
        goto done;
    }
    for (int v = 0; v < nv; v++) last_use[v] = def_at[v] = -1;
    for (int i = 0; i < p->nfops; i++) {
        pw_flat_op *op = &p->fops[i];
        if (op->dst >= 0) def_at[op->dst] = i;
        for (int j = 0; j < op->n; j++)
            if (is_temp(p->fopnds[op->first + j])) last_use[PW_OPND_INDEX(p->fopnds[op->first + j])] = i;
        if ((op->op == PW_INSTR_GETITEM || op->op == PW_INSTR_RETURN) && is_temp(op->src))
            last_use[PW_OPND_INDEX(op->src)] = i;
    }
    /* where each value is freed: after its last user, or right after it is
     * made if nobody uses it; never if the last user builds the output */
    int *free_at = def_at; /* reused: free position per value, -1 for none */
    for (int v = 0; v < nv; v++) {
        int at = last_use[v] < 0 ? def_at[v] : last_use[v];
        free_at[v] = (last_use[v] >= 0 && p->fops[last_use[v]].is_output) ? -1 : at;
        if (free_at[v] >= 0) count[free_at[v]]++;
    }
    p->free_vals = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    if (!p->free_vals) {
        s = pw_plan_oom();
        goto done;
    }
    int pos = 0;
    for (int i = 0; i < p->nfops; i++) {
        p->fops[i].free_first = pos;
        p->fops[i].nfree = 0;
        pos += count[i];
    }
    for (int v = 0; v < nv; v++) /* ascending value order: deterministic */
        if (free_at[v] >= 0) {
            pw_flat_op *op = &p->fops[free_at[v]];
            p->free_vals[op->free_first + op->nfree++] = v;
        }
    p->nfree_vals = pos;
    /* output builders take over the references of values they are the last
     * user of (the last occurrence, so earlier ones can still be read) */
    for (int i = 0; i < p->nfops; i++) {
        pw_flat_op *op = &p->fops[i];
        if (!op->is_output) continue;
        if (op->op == PW_INSTR_RETURN) {
            if (is_temp(op->src) && last_use[PW_OPND_INDEX(op->src)] == i) op->src |= PW_OPND_MOVE;
            continue;
        }
        for (int j = op->n - 1; j >= 0; j--) {
            uint32_t w = p->fopnds[op->first + j];
            if (!is_temp(w) || last_use[PW_OPND_INDEX(w)] != i || freed[PW_OPND_INDEX(w)]) continue;
            freed[PW_OPND_INDEX(w)] = true; /* moved */
            p->fopnds[op->first + j] = w | PW_OPND_MOVE;
        }
    }
done:
    pw_host_free(last_use);
    pw_host_free(def_at);
    pw_host_free(count);
    pw_host_free(freed);
    return s;
}

static uint32_t to_reg(uint32_t w, const int *reg) {
    if (!is_temp(w)) return w;
    return (w & PW_OPND_MOVE) | PW_OPND(PW_SPACE_TEMP, reg[PW_OPND_INDEX(w)]);
}

pw_status pw_plan_assign_registers(pw_plan *p) {
    int nv = p->nvalues;
    int *reg = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    int *free_regs = pw_host_alloc(((size_t)nv + 1) * sizeof(int));
    p->code = pw_host_calloc((size_t)(p->nfops + p->nfree_vals) + 1, sizeof *p->code);
    p->code_name = pw_host_calloc((size_t)(p->nfops + p->nfree_vals) + 1, sizeof *p->code_name);
    p->opnds = pw_host_calloc((size_t)p->nfopnds + 1, sizeof *p->opnds);
    if (!reg || !free_regs || !p->code || !p->code_name || !p->opnds) {
        pw_host_free(reg);
        pw_host_free(free_regs);
        return pw_plan_oom();
    }
    int nfree = 0;
    for (int i = 0; i < p->nfops; i++) {
        const pw_flat_op *op = &p->fops[i];
        if (op->dst >= 0) {
            reg[op->dst] = nfree ? free_regs[--nfree] : p->ntemps++;
        }
        pw_instr in = {.op = op->op, .n = (uint16_t)op->n};
        in.a = op->dst >= 0 ? (uint32_t)reg[op->dst] : 0;
        switch (op->op) {
        case PW_INSTR_CALL:
        case PW_INSTR_CALLSUB:
            in.b = (uint32_t)op->fn;
            /* fallthrough */
        case PW_INSTR_TUPLE:
            in.c = (uint32_t)p->nopnds;
            for (int j = 0; j < op->n; j++) p->opnds[p->nopnds++] = to_reg(p->fopnds[op->first + j], reg);
            p->nnodes++;
            break;
        case PW_INSTR_GETITEM:
            in.b = to_reg(op->src, reg);
            in.c = (uint32_t)(int32_t)op->index;
            p->nnodes++;
            break;
        case PW_INSTR_RETURN:
            in.b = to_reg(op->src, reg);
            break;
        }
        p->code_name[p->ncode] = op->name;
        p->code[p->ncode++] = in;
        for (int k = 0; k < op->nfree; k++) {
            int v = p->free_vals[op->free_first + k];
            pw_instr fr = {.op = PW_INSTR_FREE, .a = (uint32_t)reg[v]};
            p->code_name[p->ncode] = p->value_name[v];
            p->code[p->ncode++] = fr;
            free_regs[nfree++] = reg[v];
        }
    }
    pw_host_free(reg);
    pw_host_free(free_regs);
    return PW_OK;
}
