package gateway_test

import (
	"fmt"
	"strings"
)

// instanceBody is a registration as Spring's Eureka client sends it, in
// JSON or XML.
type instanceBody struct {
	app, id, host, ip string
	status, override  string
	port              int
	metadata          map[string]string
}

func (b instanceBody) json() string {
	meta := []string{}
	for k, v := range b.metadata {
		meta = append(meta, fmt.Sprintf("%q:%q", k, v))
	}
	override := ""
	if b.override != "" {
		override = fmt.Sprintf(`"overriddenStatus":%q,`, b.override)
	}
	status := b.status
	if status == "" {
		status = "UP"
	}
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":%q,"app":%q,"ipAddr":%q,"status":%q,%s`+
		`"port":{"$":%d,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},`+
		`"vipAddress":%q,"secureVipAddress":%q,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{%s}}}`,
		b.id, b.host, strings.ToUpper(b.app), b.ip, status, override, b.port, strings.ToLower(b.app), strings.ToLower(b.app), strings.Join(meta, ","))
}

func (b instanceBody) xml() string {
	var meta strings.Builder
	for k, v := range b.metadata {
		fmt.Fprintf(&meta, "<%s>%s</%s>", k, v, k)
	}
	override := ""
	if b.override != "" {
		override = "<overriddenstatus>" + b.override + "</overriddenstatus>"
	}
	status := b.status
	if status == "" {
		status = "UP"
	}
	return fmt.Sprintf(`<instance><instanceId>%s</instanceId><hostName>%s</hostName><app>%s</app><ipAddr>%s</ipAddr><status>%s</status>%s`+
		`<port enabled="true">%d</port><securePort enabled="false">443</securePort><vipAddress>%s</vipAddress><secureVipAddress>%s</secureVipAddress>`+
		`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>`+
		`<leaseInfo><renewalIntervalInSecs>30</renewalIntervalInSecs><durationInSecs>90</durationInSecs></leaseInfo><metadata>%s</metadata></instance>`,
		b.id, b.host, strings.ToUpper(b.app), b.ip, status, override, b.port, strings.ToLower(b.app), strings.ToLower(b.app), meta.String())
}
