// graph::to_json / from_json — the JSON form of a Graph, so a graph a user hit can be saved
// (COIL_DEBUG's graph.json) and recompiled later without PyTorch.
//
// from_json(to_json(g)) rebuilds g exactly: the same nodes, names, args, metadata and stack
// traces, so its to_text() is identical and writing it again gives byte-identical JSON.
// from_json accepts only well-formed graphs: any syntax error, missing or unknown field, wrong
// type, unknown dtype or tag, reference to a later or unknown node, duplicate name, bad
// expression, or graph that fails Graph::validate() throws GraphError whose message says where
// (line:column for syntax errors, a path such as "nodes[3] ('add').args[1]" otherwise).
//
// Schema (version 1):
//   {"format": "coil.graph", "version": 1, "nodes": [NODE...]}
//   NODE, by kind (the fields a kind does not list may be present only with their empty value):
//     {"name": "arg0_1", "kind": "placeholder", "meta": [META...], "scalar_type": ""}
//     {"name": "add", "kind": "call", "target": "aten.add.Tensor", "args": [ARG...],
//      "kwargs": {"alpha": ARG, ...}, "meta": [META...], "stack_trace": "..."}
//     {"name": "output", "kind": "output", "args": [ARG...]}   (the returned values; last node)
//     "name" and "kind" are required, "target" is required for calls; "args", "kwargs", "meta",
//     "scalar_type" and "stack_trace" default to empty. scalar_type is "", "int", "float" or
//     "symint"; a scalar placeholder has no meta.
//   META: {"dtype": "float32", "device": "cpu", "sizes": [E...], "strides": [E...], "offset": E}
//     dtype is torch's name ("bool", "uint8", ..., "bfloat16", "float32", "float64", "uint16",
//     "uint32", "uint64");
//     device defaults to "cpu" and offset to 0 when absent.
//   ARG: null (None) or an object with one tag:
//     {"int": 3}  {"float": 1.5}  {"float": "inf"|"-inf"|"nan"}  {"bool": true}  {"str": "tanh"}
//     {"dtype": "float32"}  {"enum": "torch.strided"}  {"sym": E}  {"node": "add"}  {"list":
//     [ARG...]} A node is referenced by name and must come earlier in "nodes".
//   E (a sym::Expr): an integer, or
//     {"sym": "s0"}  {"add": [E...], "const": k}  {"mul": [E...], "coeff": k}
//     {"floordiv": [E, E]}  {"mod": [E, E]}  {"min": [E, E...]}  {"max": [E, E...]}
//     {"lt": [E, E]}  {"le": [E, E]}  {"eq": [E, E]}  {"ne": [E, E]}
//     "const" (default 0) and "coeff" (default 1) are written only when not the default.
//     Expressions are rebuilt through sym's canonicalizing constructors (a product multiplies
//     its sum factors first, then the others, then the coefficient, which gives back every
//     canonical product sym builds).
//
// to_json writes two-space-indented JSON in which short arrays and objects stay on one line.
//
// Tests: tests/cpp/graph/serialize_test.cpp.
#pragma once

#include <string>

#include "coil/graph/graph.h"

namespace coil::graph {

std::string to_json(const Graph& g);
Graph from_json(const std::string& text);

// File forms of the above; errors name the file.
Graph load_graph_file(const std::string& path);
void save_graph_file(const Graph& g, const std::string& path);

}  // namespace coil::graph
