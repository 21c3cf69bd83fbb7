// The search page's query language: a small tokenizer, a recursive-descent
// parser and a compiler from the parsed query to a test over one test's index.
// Plain JavaScript with no dependencies; search.js calls it in the browser and
// tests/test_site_query.py runs it under node.
//
//   query    := or
//   or       := and ("OR" and)*            OR binds looser than AND
//   and      := unary (["AND"] unary)*     terms side by side are ANDed
//   unary    := ("-" | "NOT") unary | "(" or ")" | term
//   term     := field ":" value | value    value: a word or a "quoted phrase"
//
// Keywords (OR, AND, NOT) are matched in any case; quote them to search the
// word itself.  A word is a field term only when it starts with letters and one
// colon (op:add); a test id such as suites/a.py::TestX is a free word.
(function (root) {
  "use strict";

  // field -> how its value matches: "exact" (case-insensitive, * is a wildcard)
  // or "contains" (case-insensitive substring); outcome and build are their own.
  var FIELDS = {
    outcome: "outcome", op: "exact", dtype: "exact", variant: "exact", suite: "exact",
    file: "contains", build: "build", msg: "contains"
  };
  var KEYWORDS = { or: "OR", and: "AND", not: "NOT" };

  function QueryError(message) {
    this.name = "QueryError";
    this.message = message;
  }
  QueryError.prototype = Object.create(Error.prototype);

  function fieldList() { return Object.keys(FIELDS).map(function (f) { return f + ":"; }).join(" "); }

  // -- tokens: {kind: "term" | "(" | ")" | "-" | "OR" | "AND" | "NOT", field, value, quoted}
  function tokenize(text) {
    var tokens = [], i = 0, n = text.length;
    function quoted(start) {            // text[start] is the opening quote
      var end = text.indexOf('"', start + 1);
      if (end === -1) { throw new QueryError("A quote is not closed: " + text.slice(start)); }
      i = end + 1;
      return text.slice(start + 1, end);
    }
    while (i < n) {
      var c = text.charAt(i);
      if (/\s/.test(c)) { i++; continue; }
      if (c === "(" || c === ")") { tokens.push({ kind: c }); i++; continue; }
      if (c === "-") {
        if (i + 1 >= n || /[\s)]/.test(text.charAt(i + 1))) { throw new QueryError("A '-' must be followed by the term it excludes."); }
        tokens.push({ kind: "-" }); i++; continue;
      }
      if (c === '"') { tokens.push({ kind: "term", field: "", value: quoted(i), quoted: true }); continue; }
      var start = i;
      while (i < n && !/[\s()"]/.test(text.charAt(i))) { i++; }
      var word = text.slice(start, i);
      var m = /^([A-Za-z_]+):(?!:)(.*)$/.exec(word);
      if (m) {
        var field = m[1].toLowerCase(), value = m[2], wasQuoted = false;
        if (!FIELDS.hasOwnProperty(field)) { throw new QueryError("Unknown field '" + m[1] + ":'. Fields: " + fieldList()); }
        if (value === "" && text.charAt(i) === '"') { value = quoted(i); wasQuoted = true; }
        if (value === "") { throw new QueryError("'" + field + ":' needs a value, e.g. " + field + ":" + (field === "outcome" ? "fail" : "add") + "."); }
        tokens.push({ kind: "term", field: field, value: value, quoted: wasQuoted });
      } else if (KEYWORDS.hasOwnProperty(word.toLowerCase())) {
        tokens.push({ kind: KEYWORDS[word.toLowerCase()] });
      } else {
        tokens.push({ kind: "term", field: "", value: word, quoted: false });
      }
    }
    return tokens;
  }

  // -- syntax tree: {type: "and"|"or", items} | {type: "not", item} | {type: "term", field, value}
  function parse(text) {
    var tokens = tokenize(text), at = 0;
    if (!tokens.length) { return null; }
    function peek() { return tokens[at] ? tokens[at].kind : "end"; }
    function needTerm(keyword) {
      var k = peek();
      if (k === "end" || k === ")" || k === "OR" || k === "AND") { throw new QueryError(keyword + " needs a term on each side."); }
    }
    function orExpr() {
      var items = [andExpr()];
      while (peek() === "OR") { at++; needTerm("OR"); items.push(andExpr()); }
      return items.length === 1 ? items[0] : { type: "or", items: items };
    }
    function andExpr() {
      var items = [unary()];
      for (;;) {
        var k = peek();
        if (k === "end" || k === "OR" || k === ")") { break; }
        if (k === "AND") { at++; needTerm("AND"); }
        items.push(unary());
      }
      return items.length === 1 ? items[0] : { type: "and", items: items };
    }
    function unary() {
      var k = peek();
      if (k === "-" || k === "NOT") {
        at++;
        if (peek() === "end") { throw new QueryError("NOT must be followed by the term it excludes."); }
        return { type: "not", item: unary() };
      }
      if (k === "(") {
        at++;
        var inner = orExpr();
        if (peek() !== ")") { throw new QueryError("A '(' is not closed."); }
        at++;
        return inner;
      }
      if (k === ")") { throw new QueryError("A ')' has no '(' before it."); }
      if (k === "OR" || k === "AND") { throw new QueryError(k + " needs a term on each side."); }
      if (k === "end") { throw new QueryError("The query ends where a term should follow."); }
      var t = tokens[at++];
      return { type: "term", field: t.field, value: t.value };
    }
    var tree = orExpr();
    if (at < tokens.length) { throw new QueryError("A ')' has no '(' before it."); }
    return tree;
  }

  // -- what a query needs before it can run --------------------------------------------
  // build: is no condition: it picks the build whose outcomes and messages outcome: and
  // msg: look at, wherever it stands (so "build:b3 op:a OR op:b" means both ORed terms in
  // b3), but not after NOT; it is taken out of the tree the tests are matched against.
  function analyse(tree, env) {
    var info = { build: null, attrs: {}, outcome: false, msg: false, tree: null };
    function walk(node, negated) {
      if (node.type === "and" || node.type === "or") {
        var items = node.items.map(function (x) { return walk(x, negated); }).filter(function (x) { return x; });
        return items.length === 0 ? null : items.length === 1 ? items[0] : { type: node.type, items: items };
      }
      if (node.type === "not") {
        var item = walk(node.item, true);
        return item && { type: "not", item: item };
      }
      var f = node.field;
      if (f === "build") {
        if (negated) { throw new QueryError("build: picks the build the query looks at; it cannot follow NOT or -."); }
        var slug = findBuild(env.builds, node.value);
        if (slug === null) { throw new QueryError("No build named '" + node.value + "'."); }
        if (info.build !== null && info.build !== slug) { throw new QueryError("Use one build: per query."); }
        info.build = slug;
        return null;
      }
      if (f === "outcome") {
        if (!env.outcomes.hasOwnProperty(node.value.toLowerCase())) {
          throw new QueryError("Unknown outcome '" + node.value + "'. Outcomes: " + Object.keys(env.outcomes).sort().join(", ") + ".");
        }
        info.outcome = true;
      } else if (f === "msg") {
        info.msg = true;
      } else if (f) {
        info.attrs[f] = true;
      }
      return node;
    }
    info.tree = tree ? walk(tree, false) : null;
    return info;
  }
  function findBuild(builds, name) {
    var lower = name.toLowerCase();
    for (var i = 0; i < builds.length; i++) {
      if (builds[i].name.toLowerCase() === lower || builds[i].slug.toLowerCase() === lower) { return builds[i].slug; }
    }
    return null;
  }

  function globTest(value) {
    // exact, case-insensitive; * matches any run of characters
    var pattern = value.toLowerCase().split("*").map(function (part) {
      return part.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
    }).join(".*");
    var re = new RegExp("^" + pattern + "$");
    return function (s) { return re.test(s.toLowerCase()); };
  }

  // The values of one attribute column (data/attrs.js) as numbers per test (0: none).
  // ``n``: how many numbers (a column whose values are all 0 has width 0 and no codes)
  function decodeColumn(col, digits, n) {
    if (n === undefined) { n = col.width ? col.codes.length / col.width : 0; }
    var out = new Int32Array(n), value = {};
    for (var d = 0; d < digits.length; d++) { value[digits.charAt(d)] = d; }
    for (var i = 0, p = 0; i < n; i++) {
      var x = 0;
      for (var k = 0; k < col.width; k++) { x = x * digits.length + value[col.codes.charAt(p++)]; }
      out[i] = x;
    }
    return out;
  }

  // A function (index of a test) -> bool, from analyse's tree.  ``ctx``: ids (every test id, in data/tests.js
  // order), lower (the same lowercased), codes (the chosen build's outcome codes),
  // columns (name -> {values, numbers}), messages (test id -> lowercased message).
  function compile(tree, env, ctx) {
    function node(n) {
      if (n.type === "and") {
        var all = n.items.map(node);
        return function (i) { for (var k = 0; k < all.length; k++) { if (!all[k](i)) { return false; } } return true; };
      }
      if (n.type === "or") {
        var any = n.items.map(node);
        return function (i) { for (var k = 0; k < any.length; k++) { if (any[k](i)) { return true; } } return false; };
      }
      if (n.type === "not") {
        var inner = node(n.item);
        return function (i) { return !inner(i); };
      }
      return term(n.field, n.value);
    }
    function term(field, value) {
      var lowerValue = value.toLowerCase();
      if (!field) { return function (i) { return ctx.lower[i].indexOf(lowerValue) !== -1; }; }
      if (field === "outcome") {
        var codes = env.outcomes[lowerValue];
        return function (i) { return codes.indexOf(ctx.codes.charAt(i)) !== -1; };
      }
      if (field === "msg") {
        return function (i) { var m = ctx.messages[ctx.ids[i]]; return m !== undefined && m.indexOf(lowerValue) !== -1; };
      }
      // an attribute: decide once per distinct value, then look up each test's number
      var col = ctx.columns[field], match = FIELDS[field] === "contains"
        ? function (s) { return s.toLowerCase().indexOf(lowerValue) !== -1; } : globTest(value);
      var hit = [false].concat(col.values.map(match));
      return function (i) { return hit[col.numbers[i]]; };
    }
    return tree ? node(tree) : function () { return true; };
  }

  var api = { parse: parse, analyse: analyse, compile: compile, decodeColumn: decodeColumn,
              QueryError: QueryError, FIELDS: FIELDS, tokenize: tokenize };
  if (typeof module !== "undefined" && module.exports) { module.exports = api; }
  if (root) { root.TC = root.TC || {}; root.TC.query = api; }
})(typeof window !== "undefined" ? window : null);
