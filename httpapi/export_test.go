package httpapi

import (
	"net/http"
	"net/http/httptest"
)

// Route is an endpoint as the handler registers it, for the OpenAPI test.
type Route struct {
	Pattern string // "METHOD /path"
	People  bool   // the human token only
	Agents  bool   // an agent token only
}

// Routes lists the registered endpoints.
func Routes() []Route {
	out := make([]Route, len(routes))
	for i, rt := range routes {
		out[i] = Route{Pattern: rt.pattern, People: rt.who == people, Agents: rt.who == agents}
	}
	return out
}

// Pattern returns the ServeMux pattern the handler's mux matches for a
// request: the real routing, without running a handler.
func Pattern(h http.Handler, method, path string) string {
	_, p := h.(*api).mux.Handler(httptest.NewRequest(method, "http://localhost"+path, nil))
	return p
}
