package gate

import (
	"strconv"
	"text/template"

	"github.com/portcullis/portcullis"
)

// upstreamMethods are the requests an upstream MCP server sends to its
// client that the gateway has the gate decide (policy upstreamRequests).
var upstreamMethods = [...]string{portcullis.MethodSampling, portcullis.MethodElicitation, portcullis.MethodRoots}

// upstreamRationale says, for a person reading a refusal or an approval
// request, what each kind of request lets a server do.
var upstreamRationale = map[string]string{
	portcullis.MethodSampling:    "sampling lets a server make the client's model act on text the server wrote (upstreamRequests.sampling)",
	portcullis.MethodElicitation: "elicitation lets a server ask the person a question (upstreamRequests.elicitation)",
	portcullis.MethodRoots:       "roots tell a server which directories it may work in (upstreamRequests.roots)",
}

// upstreamSummary describes the request in an approval request.
var upstreamSummary = map[string]string{
	portcullis.MethodSampling:    `upstream {{.upstream}} asks the client's model to answer {{.messages}}`,
	portcullis.MethodElicitation: `upstream {{.upstream}} asks the person: {{.message}}`,
	portcullis.MethodRoots:       `upstream {{.upstream}} asks for the client's roots`,
}

// compileUpstreamRequests builds the routes of the upstream requests from
// the policy's upstreamRequests: allow → AUTO_APPROVE, confirm →
// CONFIRM_SINGLE_USE, deny (or anything else) → DENY. None can be
// elevated: an element's allow never lowers them.
func compileUpstreamRequests(p *portcullis.Policy) (map[string]*route, error) {
	out := make(map[string]*route, len(upstreamMethods))
	for _, m := range upstreamMethods {
		rule := p.UpstreamRequests.Rule(m)
		r := &route{
			name:      portcullis.UpstreamRequestTool(m),
			endpoint:  portcullis.Execute,
			rationale: upstreamRationale[m],
		}
		switch rule {
		case portcullis.UpstreamAllow:
			r.base = portcullis.AutoApprove
		case portcullis.UpstreamConfirm:
			r.base = portcullis.ConfirmSingleUse
		default:
			r.base = portcullis.Deny
		}
		r.level = r.base
		tmpl, err := template.New(r.name).Option("missingkey=zero").Parse(upstreamSummary[m])
		if err != nil {
			return nil, err
		}
		r.summary = tmpl
		r.quoted = strconv.Quote(r.name)
		r.trace = r.name + ": a request an upstream sent to its client; upstreamRequests rule " + strconv.Quote(string(rule)) + ": " + r.base.String() + ", not elevatable"
		out[m] = r
	}
	return out, nil
}

// upstreamRoute is the route of a call: the upstream request's when the
// gateway made the call for one (UpstreamTool.Request, which only code in
// the process can set), the policy's tools entry otherwise. An unknown
// method gets the DENY route of a request no rule names.
func (c *compiled) upstreamRoute(call *portcullis.Call) *route {
	u := call.Upstream
	if u == nil || u.Request == "" {
		return c.routes[call.Tool]
	}
	if r, ok := c.requests[u.Request]; ok {
		return r
	}
	return &route{
		name: call.Tool, endpoint: portcullis.Execute, base: portcullis.Deny, level: portcullis.Deny,
		quoted:    strconv.Quote(call.Tool),
		rationale: "no upstreamRequests rule covers the method " + strconv.Quote(u.Request),
		trace:     call.Tool + ": a request an upstream sent to its client, of a method no rule covers: DENY",
	}
}
