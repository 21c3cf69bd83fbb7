// Draws the operator matrix from its lazily loaded data, then wires the
// filters.  Every text goes in through textContent (operator names come from
// the tests).
(function () {
  "use strict";
  var TC = window.TC, cfg = TC.matrixData;
  var table = document.getElementById("matrix"), status = document.getElementById("matrix-status");

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }

  TC.load(cfg.src, cfg.key).then(function (data) {
    var head = el("tr");
    ["operator", "variant"].concat(data.dtypes).forEach(function (h) {
      var th = el("th", h); th.scope = "col"; head.appendChild(th);
    });
    table.tHead.appendChild(head);
    var body = document.createDocumentFragment();
    data.rows.forEach(function (r) {
      var tr = el("tr"), states = {};
      tr.setAttribute("data-op", r[0]);
      tr.setAttribute("data-variant", r[1]);
      var th = el("th", r[0]); th.scope = "row"; tr.appendChild(th);
      tr.appendChild(el("td", r[1]));
      r[2].forEach(function (c, j) {
        if (!c) { tr.appendChild(el("td", "", "cell none")); return; }
        var s = data.states[c[0]];
        states[s.key] = true;
        var td = el("td", s.symbol + " " + c[1] + "/" + c[2], "cell c-" + s.key);
        td.tabIndex = 0;
        var parts = [];
        c[3].forEach(function (n, k) { if (n) { parts.push(data.counts[k] + " " + n); } });
        td.title = r[0] + " " + r[1] + " " + data.dtypes[j] + ": " + s.label + "; " + parts.join(", ");
        tr.appendChild(td);
      });
      tr.setAttribute("data-states", Object.keys(states).sort().join(" "));
      body.appendChild(tr);
    });
    table.tBodies[0].appendChild(body);
    table.hidden = false;
    status.textContent = "";
    TC.wireMatrix(document.getElementById("matrix-form"), table);
  }, function (err) { status.textContent = String(err.message || err); });
})();
