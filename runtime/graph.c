/*
 * graph.c — the graph_verbose option (AMPC_GRAPH_VERBOSE): what a captured steps' graph holds,
 * told to the log when the graph is made. 1 counts its nodes (kernels, memsets, others); 2 also
 * lists each node in order with the kernel's name, as the driver knows it (cuFuncGetName,
 * reached through cudaGetDriverEntryPointByVersion: the runtime links cudart only). A library
 * step may put more than one node into the graph (cuBLASLt's split-K GEMMs end with a reduction
 * kernel of their own), and this is where that shows. Nothing here changes the graph or fails a
 * run.
 */
#include "runtime/internal.h"

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of kernel node n's function, or "?" when the driver does not say. */
static const char *kernel_name(cudaGraphNode_t n) {
    static __typeof__(&cuGraphKernelNodeGetParams) params;
    static __typeof__(&cuKernelGetFunction) function;
    static __typeof__(&cuFuncGetName) name;
    static bool tried;
    if (!tried) {
        tried = true;
        const char *sym[3] = {"cuGraphKernelNodeGetParams", "cuKernelGetFunction", "cuFuncGetName"};
        void *f[3] = {NULL, NULL, NULL};
        enum cudaDriverEntryPointQueryResult q;
        for (int i = 0; i < 3; i++)
            if (cudaGetDriverEntryPointByVersion(sym[i], &f[i], 12000, cudaEnableDefault, &q) !=
                    cudaSuccess || q != cudaDriverEntryPointSuccess)
                f[i] = NULL;
        memcpy(&params, &f[0], sizeof f[0]);
        memcpy(&function, &f[1], sizeof f[1]);
        memcpy(&name, &f[2], sizeof f[2]);
    }
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    CUfunction fn = NULL;
    const char *s = NULL;
    if (params && function && name && params(n, &p) == CUDA_SUCCESS &&
        ((fn = p.func) != NULL || (p.kern && function(&fn, p.kern) == CUDA_SUCCESS)) &&
        name(&s, fn) == CUDA_SUCCESS && s)
        return s;
    return "?";
}

void rt_graph_describe(cudaGraph_t g, int level) {
    size_t n = 0, kernels = 0, memsets = 0;
    cudaGraphNode_t *nodes = NULL;
    if (level == 0 || cudaGraphGetNodes(g, NULL, &n) != cudaSuccess || n == 0 ||
        (nodes = calloc(n, sizeof *nodes)) == NULL || cudaGraphGetNodes(g, nodes, &n) != cudaSuccess) {
        free(nodes);
        rt_cuda_clear();
        return;
    }
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) continue;
        kernels += t == cudaGraphNodeTypeKernel;
        memsets += t == cudaGraphNodeTypeMemset;
        if (level == 2)
            rt_log("graph node %zu: %s", i,
                    t == cudaGraphNodeTypeKernel ? kernel_name(nodes[i])
                    : t == cudaGraphNodeTypeMemset ? "(memset)" : "(other)");
    }
    rt_cuda_clear();
    rt_log("steps' graph: %zu nodes: %zu kernels, %zu memsets, %zu others", n,
            kernels, memsets, n - kernels - memsets);
    free(nodes);
}
