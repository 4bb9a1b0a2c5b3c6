package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// GET /v1/keys/{id}/routing
func (a *api) keyRouting(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	kr, err := a.srv.KeyRouting(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, kr)
}

// PUT /v1/keys/{id}/routing: the body is the routing object itself, the
// same as a request's "provider" object.
func (a *api) setKeyRouting(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	body, err := readBody(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	routing, err := decodeRouting(body)
	if err != nil {
		return err
	}
	kr, err := a.srv.SetKeyRouting(r.Context(), r.PathValue("id"), routing)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, kr)
}

// DELETE /v1/keys/{id}/routing
func (a *api) removeKeyRouting(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := a.srv.RemoveKeyRouting(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}

// decodeRouting decodes a routing object, naming fields as routing.<name>.
func decodeRouting(body []byte) (idlegrid.Routing, error) {
	var out idlegrid.Routing
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&out)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			return out, idlegrid.Errorf(idlegrid.EINVALID, "request body has data after the JSON value; send exactly one JSON object")
		}
		if err = checkStrict(body, reflect.TypeFor[idlegrid.Routing]()); err == nil {
			return out, checkNUL(body)
		}
	}
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		err = jsonError(err, body, reflect.TypeFor[idlegrid.Routing]())
		errors.As(err, &e)
	}
	if e != nil && e.Field != "" && !strings.HasPrefix(e.Field, "routing") {
		e2 := *e
		e2.Field = "routing." + e.Field
		return out, &e2
	}
	return out, err
}
