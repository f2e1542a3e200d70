// The page the browser asked for before sign-in (/ui/#jobs) survives it:
// its fragment never reaches the server, so the form carries it.
"use strict";
(function () {
  const next = document.getElementById("next");
  if (location.hash.length > 1) next.value = location.hash;
})();
