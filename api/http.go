package api

import (
	"encoding/json"
	"net/http"
)

// WriteJSON writes v as the JSON body of a response with the given status.
// Servers use it so every endpoint answers with the same content type.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// The status line is already sent, so a failed write (client gone)
	// has nobody left to tell.
	_ = enc.Encode(v)
}

// WriteError answers with status and the body {"error": msg}. msg should say
// what to do, not only what failed.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, &Error{Message: msg})
}
